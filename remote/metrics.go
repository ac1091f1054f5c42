package remote

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a request, the outcome label of ea_remote_requests_total.
const (
	outcomeOK          = "ok"           // a state: the record is applied
	outcomeWorkerError = "worker_error" // the worker answered a retryable error
	outcomePermanent   = "permanent"    // the worker answered a permanent error
	outcomeMalformed   = "malformed"    // the reply broke the contract
	outcomeTimeout     = "timeout"      // no answer in time
	outcomeNoWorker    = "no_worker"    // nobody listens
	outcomeError       = "error"        // the request could not be sent (or was cancelled)
)

var outcomes = []string{outcomeOK, outcomeWorkerError, outcomePermanent, outcomeMalformed, outcomeTimeout, outcomeNoWorker, outcomeError}

// metrics are a registry's remote-kind metrics, shared by its kinds.
type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// newMetrics registers the metrics on reg, or reuses those another kind
// registered there, and kind's gauges read from h; nil reg: metrics that
// go nowhere.
func newMetrics(reg prometheus.Registerer, kind string, h *health) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ea_remote_requests_total",
			Help: "Requests of remote kinds to their workers, by outcome.",
		}, []string{"kind", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ea_remote_request_seconds",
			Help:    "Time from a remote kind's request to its worker's answer (answered requests only).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind"}),
	}
	if reg != nil {
		if err := register(reg, &m.requests); err != nil {
			return nil, err
		}
		if err := register(reg, &m.seconds); err != nil {
			return nil, err
		}
		if err := registerGauges(reg, kind, h); err != nil {
			return nil, err
		}
	}
	for _, o := range outcomes { // start at 0: a panel shows 0, not "no data"
		m.requests.WithLabelValues(kind, o)
	}
	return m, nil
}

// register registers *c on reg, or points *c at the collector already
// registered there under the same name.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		existing, ok := are.ExistingCollector.(C)
		if !ok {
			return fmt.Errorf("%w: a metric of another type is registered under the same name: %v", ErrInvalid, err)
		}
		*c = existing
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: register metrics: %v", ErrInvalid, err)
	}
	return nil
}

// observe counts one request of kind with outcome, and its duration when
// the worker answered.
func (m *metrics) observe(kind, outcome string, answered bool, took time.Duration) {
	m.requests.WithLabelValues(kind, outcome).Inc()
	if answered {
		m.seconds.WithLabelValues(kind).Observe(took.Seconds())
	}
}

// registerGauges registers kind's gauges, read from h at each scrape:
// ea_remote_stalled{kind} and ea_remote_waiting_effectors{kind}. A kind
// registered twice on one registry (two nodes in one process) keeps the
// first one's.
func registerGauges(reg prometheus.Registerer, kind string, h *health) error {
	labels := prometheus.Labels{"kind": kind}
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "ea_remote_stalled",
			Help:        "1 while a remote kind's requests find no worker or go unanswered (from the first such request until a worker answers), else 0.",
			ConstLabels: labels,
		}, func() float64 {
			if down, _ := h.stalled(time.Now()); down {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "ea_remote_waiting_effectors",
			Help:        "Effectors of a remote kind whose record in hand waits for a worker (their latest request found none or went unanswered).",
			ConstLabels: labels,
		}, func() float64 {
			_, n := h.stalled(time.Now())
			return float64(n)
		}),
	} {
		err := reg.Register(g)
		if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: register metrics: %v", ErrInvalid, err)
		}
	}
	return nil
}
