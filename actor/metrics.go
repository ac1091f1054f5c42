package actor

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a processed record (label "outcome").
const (
	outcomeOK        = "ok"
	outcomeDead      = "dead"
	outcomeDuplicate = "duplicate"
	// outcomeApplied: a record found applied by an earlier reader of its
	// partition (another node, before a lease moved); counted ok there.
	outcomeApplied = "already_applied"
)

// Dead-letter reasons (label "reason" and header EA-Dead-Reason).
const (
	reasonDecode      = "decode"       // envelope or payload malformed
	reasonContentType = "content_type" // payload content type not accepted by the kind
	reasonOversize    = "oversize"     // payload above the kind's MaxPayload
	reasonRejected    = "rejected"     // logic returned a permanent error
	reasonFailed      = "failed"       // logic failed on every attempt
	reasonPanic       = "panic"        // logic panicked
	reasonRedelivered = "redelivered"  // delivered MaxDeliveries times
	reasonCancelled   = "cancelled"    // a cancel record stopped the logic, which failed
	reasonNoEffector  = "no_effector"  // sent to an effector never created
	reasonTerminated  = "terminated"   // sent to a terminated effector
	reasonBadSubject  = "bad_subject"  // stored under a mailbox subject no effector has
	// EA-Reply names a subject records may not be sent to (Options.ReplySubjects)
	reasonReplyForbidden = "reply_forbidden"
	// the logic's outputs can never be published (too large for the server)
	reasonOutputTooLarge = "output_too_large"
	// the new state document would exceed the server's max_payload
	reasonStateTooLarge = "state_too_large"
	// the effector's state document is corrupt (ErrCorruptState) until reset
	reasonCorruptState = "corrupt_state"
)

type metrics struct {
	processed  *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	redelivers *prometheus.CounterVec
	dead       *prometheus.CounterVec
	conflicts  *prometheus.CounterVec
	retries    *prometheus.CounterVec
	active     *prometheus.GaugeVec
	backlog    *prometheus.Desc
	stalled    *prometheus.Desc

	activations  *prometheus.CounterVec
	passivations *prometheus.CounterVec
	handovers    *prometheus.CounterVec
	overflows    *prometheus.CounterVec
	nodes        prometheus.Gauge
	lapses       prometheus.Counter
	// bucketOutages counts the times this node's heartbeats did not come
	// back for more than two beats (placement.answeredAgain).
	bucketOutages prometheus.Counter
	// leaderMoves counts the stream leaders this node moved to spread the
	// cluster's writes again (placement.spread).
	leaderMoves prometheus.Counter
	departures  *prometheus.CounterVec
	versions    *versionMetrics
	node        *Node
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_records_processed_total",
			Help: "Records taken from mailboxes, by kind and outcome: ok (applied here, counted when its state is written), dead (sent to dead letters), duplicate (a redelivery of a record this node applied), already_applied (found applied by an earlier reader of the partition: another node, before a lease moved). Summed over nodes, ok counts each record applied once.",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ea_record_processing_seconds",
			Help:    "Time from taking a record to acknowledging it (logic, outputs, state write), by kind.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind"}),
		redelivers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_record_redeliveries_total",
			Help: "Records delivered more than once (after a crash, a timeout or a release), by kind.",
		}, []string{"kind"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_dead_letters_total",
			Help: "Records sent to dead letters, by kind and reason.",
		}, []string{"kind", "reason"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_state_conflicts_total",
			Help: "State writes that lost a compare-and-set, by kind.",
		}, []string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_logic_retries_total",
			Help: "Logic attempts retried after an error, by kind.",
		}, []string{"kind"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ea_effectors_active",
			Help: "Effectors this node has loaded (their state cached, in the partitions it reads), by kind.",
		}, []string{"kind"}),
		backlog: prometheus.NewDesc("ea_mailbox_backlog",
			"Records held by this node for its loaded effectors, waiting behind the one in hand, by kind.",
			[]string{"kind"}, nil),
		stalled: prometheus.NewDesc("ea_effectors_stalled",
			"Effectors of this node holding records that finished none for longer than the stall threshold (Options.StallAfter, 10s by default), by kind.",
			[]string{"kind"}, nil),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_activations_total",
			Help: "Passive effectors this node loaded because a record arrived for them, by kind.",
		}, []string{"kind"}),
		passivations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_passivations_total",
			Help: "Effectors this node passivated (dropped from memory) after they were idle, by kind.",
		}, []string{"kind"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_handovers_total",
			Help: "Mailbox partitions this node took over from another node (dead, or gone without freeing them), by kind.",
		}, []string{"kind"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_overflows_total",
			Help: "Effectors whose backlog grew past Kind.Overflow and that went on reading their own mailbox, by kind.",
		}, []string{"kind"}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ea_nodes_live",
			Help: "Nodes this node sees alive (its own heartbeat included).",
		}),
		lapses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ea_lease_lapses_total",
			Help: "Times this node's heartbeat was acknowledged only after its lease TTL had run out (a freeze, a GC pause, NATS out of reach, a new connection); each time it checks its leases at the server and reads again the partitions whose lease moved.",
		}),
		bucketOutages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ea_placement_outages_total",
			Help: "Times this node's heartbeats did not come back from the placement bucket for more than two beats (a leader election, a server restart, NATS out of reach); after each, every node gets a full lease TTL to renew before any counts as gone.",
		}),
		leaderMoves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ea_placement_leader_moves_total",
			Help: "Stream leaders this node asked to move to another server to spread the cluster's writes again after a restart or an election (Options.SpreadLeaders; only the live node with the lowest id moves leaders).",
		}),
		departures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_node_departures_total",
			Help: "Other nodes this node saw leave the live set, by how: closed (their connection was gone), expired (no heartbeat for the TTL), left (they said goodbye).",
		}, []string{"how"}),
		versions: newVersionMetrics(),
		node:     n,
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.processed, m.duration, m.redelivers, m.dead, m.conflicts, m.retries, m.active, m.activations, m.passivations, m.handovers, m.overflows, m.nodes, m.lapses, m.bucketOutages, m.leaderMoves, m.departures, m}, m.versions.collectors()...) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, invalidf("metrics already registered: give each node its own prometheus.Registerer")
			}
			return nil, err
		}
	}
	return m, nil
}

// Describe and Collect make metrics a collector of the gauges computed at
// scrape time: the backlog, the partitions read and the stall counts (those
// by the watchdog).
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.backlog
	ch <- m.stalled
	ch <- partitionsReadDesc
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range m.node.backlog() {
		ch <- prometheus.MustNewConstMetric(m.backlog, prometheus.GaugeValue, float64(n), kind)
	}
	for kind, n := range m.node.stalledByKind() {
		ch <- prometheus.MustNewConstMetric(m.stalled, prometheus.GaugeValue, float64(n), kind)
	}
	m.collectPlacement(ch)
}

// hosted starts the per-kind counters of a hosted kind at 0, so that a
// dashboard shows 0 (not "no data") for events that have not happened yet:
// Prometheus' advice for labels known in advance.
func (m *metrics) hosted(kind string) {
	for _, v := range []*prometheus.CounterVec{m.redelivers, m.conflicts, m.retries, m.activations, m.passivations, m.handovers, m.overflows} {
		v.WithLabelValues(kind)
	}
	m.versions.hosted(kind)
	m.forKind(kind)
}

// kindMetrics holds the children of the hot-path metrics for one kind, so
// processing a record does no label lookups.
type kindMetrics struct {
	ok, duplicate, applied, dead prometheus.Counter
	duration                     prometheus.Observer
}

func (m *metrics) forKind(kind string) *kindMetrics {
	return &kindMetrics{
		ok:        m.processed.WithLabelValues(kind, outcomeOK),
		duplicate: m.processed.WithLabelValues(kind, outcomeDuplicate),
		applied:   m.processed.WithLabelValues(kind, outcomeApplied),
		dead:      m.processed.WithLabelValues(kind, outcomeDead),
		duration:  m.duration.WithLabelValues(kind),
	}
}
