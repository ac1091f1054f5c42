package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream groups (docs/layout.md): with G > 1 groups the P mailbox
// partitions are spread over G mailbox streams and G state buckets, so that
// their leaders can be on different servers of a cluster. Partition p
// belongs to group p mod G. Publishers keep writing <prefix>.mbox.<kind>.<id>:
// an account subject mapping (see [Names.MailboxMapping]) adds the partition
// token before any stream sees the record, and each group's stream listens on
// the stored subjects of its partitions.

// MaxGroups bounds the stream group count: every group is a mailbox stream
// and a state bucket (on a cluster, a Raft group each).
const MaxGroups = 64

// ErrGroupsUnsupported: a part of the runtime that reads the mailbox stream
// or the state bucket by name was asked to work on a deployment with stream
// groups ([Config.Groups] > 1), which it does not support yet. It refuses
// rather than read the wrong stream.
var ErrGroupsUnsupported = errors.New("bus: not supported with stream groups yet")

// ErrUnsteady: the cluster is not steady (a replica offline, a peer missing,
// a stream without a leader), so no stream leader is moved now
// ([Conn.SpreadLeader]).
var ErrUnsteady = errors.New("bus: the cluster is not steady (a server away or a stream electing)")

// Stream metadata keys of a group's mailbox stream: they tell a process that
// did not configure the layout what it is (see [Conn.Provision]).
const (
	metaGroups     = "effectors.groups"
	metaGroup      = "effectors.group"
	metaPartitions = "effectors.partitions"
)

// WithGroups returns n with g stream groups (1 to [MaxGroups], at most the
// partition count).
func (n Names) WithGroups(g int) (Names, error) {
	if g < 1 || g > MaxGroups {
		return n, fmtInvalid("stream groups %d: must be 1-%d", g, MaxGroups)
	}
	if g > n.partitions {
		return n, fmtInvalid("stream groups %d: more than the %d partitions (each group holds at least one partition; set groups to at most %d)", g, n.partitions, n.partitions)
	}
	n.groups = g
	return n, nil
}

// Groups returns the stream group count (1: one mailbox stream, one state
// bucket).
func (n Names) Groups() int { return max(n.groups, 1) }

// Group returns the stream group of partition p: p mod [Names.Groups].
func (n Names) Group(p int) int { return p % n.Groups() }

// GroupOf returns the stream group of r's mailbox and state document.
func (n Names) GroupOf(r records.Ref) int { return n.Group(n.Partition(r)) }

// GroupPartitions returns the partitions of group g, in order.
func (n Names) GroupPartitions(g int) []int {
	var ps []int
	for p := g; p < n.partitions; p += n.Groups() {
		ps = append(ps, p)
	}
	return ps
}

// groupSuffix is the name suffix of group g's streams and buckets with
// several groups: _<g>_of_<G>. The count is part of the name, so that a
// layout of another count never shares a stream with this one.
func (n Names) groupSuffix(g int) string {
	return "_" + strconv.Itoa(g) + "_of_" + strconv.Itoa(n.Groups())
}

// MailboxStreamOf is the mailbox stream of group g: [Names.MailboxStream]
// (EA_MBOX) with one group, EA_MBOX_<g>_OF_<G> with several.
func (n Names) MailboxStreamOf(g int) string { return n.groupStream(n.MailboxStream(), g) }

// groupStream is the stream of group g of the family whose one-stream
// layout is stream: stream itself with one group, <stream>_<g>_OF_<G> with
// several.
func (n Names) groupStream(stream string, g int) string {
	if n.Groups() == 1 {
		return stream
	}
	return stream + strings.ToUpper(n.groupSuffix(g))
}

// groupStreams lists the streams (or buckets) of a family (of, by group),
// group 0 first.
func (n Names) groupStreams(of func(g int) string) []string {
	out := make([]string, n.Groups())
	for g := range out {
		out[g] = of(g)
	}
	return out
}

// groupSubjects are the subjects group g's stream of area (mbox, out)
// listens on with several groups: <prefix>.<area>.<p>.*.* for each
// partition p of the group.
func (n Names) groupSubjects(area string, g int) []string {
	ps := n.GroupPartitions(g)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = n.prefix + "." + area + "." + strconv.Itoa(p) + ".*.*"
	}
	return out
}

// PartitionStream is the mailbox stream that holds partition p.
func (n Names) PartitionStream(p int) string { return n.MailboxStreamOf(n.Group(p)) }

// MailboxStreamFor is the mailbox stream that holds r's mailbox.
func (n Names) MailboxStreamFor(r records.Ref) string { return n.MailboxStreamOf(n.GroupOf(r)) }

// MailboxStreams lists the mailbox streams, group 0 first.
func (n Names) MailboxStreams() []string { return n.groupStreams(n.MailboxStreamOf) }

// GroupSubjects are the subjects group g's mailbox stream listens on with
// several groups: <prefix>.mbox.<p>.*.* for each partition p of the group —
// the stored mailbox subjects (see [Names.StoredMailbox]) the account
// mapping publishes to.
func (n Names) GroupSubjects(g int) []string { return n.groupSubjects("mbox", g) }

// OutboxStreamOf is the outbox stream of group g: [Names.OutboxStream]
// (EA_OUT) with one group, EA_OUT_<g>_OF_<G> with several.
func (n Names) OutboxStreamOf(g int) string { return n.groupStream(n.OutboxStream(), g) }

// OutboxStreamFor is the outbox stream that holds r's outbox.
func (n Names) OutboxStreamFor(r records.Ref) string { return n.OutboxStreamOf(n.GroupOf(r)) }

// OutboxStreams lists the outbox streams, group 0 first.
func (n Names) OutboxStreams() []string { return n.groupStreams(n.OutboxStreamOf) }

// OutboxGroupSubjects are the subjects group g's outbox stream listens on
// with several groups: <prefix>.out.<p>.*.* for each partition p of the
// group (see [Names.Outbox]).
func (n Names) OutboxGroupSubjects(g int) []string { return n.groupSubjects("out", g) }

// GroupedOutboxOf parses a grouped outbox subject
// (<prefix>.out.<partition>.<kind>.<id>) into the effector and partition.
// ok is false when subject is not one; the ref may still be invalid and the
// partition not the ref's (see [Names.StoredMailboxOf]).
func (n Names) GroupedOutboxOf(subject string) (r records.Ref, partition int, ok bool) {
	return n.partitionedOf("out", subject)
}

// storedOutbox is [Names.Stored] of an outbox subject (tail: what follows
// <prefix>.out.).
func (n Names) storedOutbox(subject, tail string) (stream, filter string, ok bool) {
	if n.Groups() == 1 {
		return n.OutboxStream(), subject, true
	}
	var r records.Ref
	switch tokens := strings.Split(tail, "."); len(tokens) {
	case 2:
		r = records.Ref{Kind: tokens[0], ID: tokens[1]}
	case 3:
		gr, p, ok := n.GroupedOutboxOf(subject)
		if !ok || gr.Validate() != nil || n.Partition(gr) != p {
			return "", "", false
		}
		r = gr
	default:
		return "", "", false
	}
	if r.Validate() != nil {
		return "", "", false
	}
	return n.OutboxStreamFor(r), n.Outbox(r), true
}

// MailboxMapping is the account subject mapping stream groups need in the
// account of every client that publishes to mailboxes (see docs/layout.md):
// source <prefix>.mbox.*.*, destination
// <prefix>.mbox.{{partition(P,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.
func (n Names) MailboxMapping() (source, destination string) {
	return n.MailboxIngest(), n.MailboxTransform()
}

// StateBucketOf is the state bucket of group g: [Names.StateBucket]
// (ea_state) with one group, ea_state_<g>_of_<G> with several.
func (n Names) StateBucketOf(g int) string {
	if n.Groups() == 1 {
		return n.StateBucket()
	}
	return n.StateBucket() + n.groupSuffix(g)
}

// StateBucketFor is the state bucket that holds r's state document.
func (n Names) StateBucketFor(r records.Ref) string { return n.StateBucketOf(n.GroupOf(r)) }

// StateBuckets lists the state buckets, group 0 first.
func (n Names) StateBuckets() []string { return n.groupStreams(n.StateBucketOf) }

// StateStreamFor is the stream behind the state bucket of r:
// KV_<bucket>.
func (n Names) StateStreamFor(r records.Ref) string { return "KV_" + n.StateBucketFor(r) }

// GroupOfKey returns the stream group of the state document under key
// (<kind>.<id>, see [Names.StateKey]), and false when key is not one.
func (n Names) GroupOfKey(key string) (int, bool) {
	kind, id, ok := strings.Cut(key, ".")
	r := records.Ref{Kind: kind, ID: id}
	if !ok || r.Validate() != nil {
		return 0, false
	}
	return n.GroupOf(r), true
}

// groupsOfStream reads the layout a group's mailbox stream records in its
// metadata: the group count and partition count.
func groupsOfStream(sc jetstream.StreamConfig) (groups, partitions int, ok bool) {
	g, gerr := strconv.Atoi(sc.Metadata[metaGroups])
	p, perr := strconv.Atoi(sc.Metadata[metaPartitions])
	return g, p, gerr == nil && perr == nil && g >= 1 && p >= 1
}

// groupMailboxConfigs are the configurations of the G mailbox streams.
func (c *Conn) groupMailboxConfigs() []jetstream.StreamConfig {
	return c.groupConfigs(c.names.MailboxStreamOf, c.names.GroupSubjects, "effector mailboxes, stream group %d of %d: the record log of what effectors received")
}

// groupOutboxConfigs are the configurations of the G outbox streams.
func (c *Conn) groupOutboxConfigs() []jetstream.StreamConfig {
	return c.groupConfigs(c.names.OutboxStreamOf, c.names.OutboxGroupSubjects, "effector outboxes, stream group %d of %d: the record log of what effectors emitted")
}

// groupConfigs are the configurations of one family's G streams: group g's
// named name(g), listening on subjects(g), described by description (with
// the group and the count), its layout in its metadata.
func (c *Conn) groupConfigs(name func(int) string, subjects func(int) []string, description string) []jetstream.StreamConfig {
	n := c.names
	out := make([]jetstream.StreamConfig, n.Groups())
	for g := range out {
		sc := c.logStream(name(g), fmt.Sprintf(description, g, n.Groups()), "")
		sc.Subjects = subjects(g)
		sc.Metadata = map[string]string{
			metaGroups:     strconv.Itoa(n.Groups()),
			metaGroup:      strconv.Itoa(g),
			metaPartitions: strconv.Itoa(n.Partitions()),
		}
		out[g] = sc
	}
	return out
}

// retireOutbox makes the one outbox stream (EA_OUT) of a deployment that
// has stream groups stop taking records: its subjects (<prefix>.out.>)
// would overlap the groups' outbox streams', which JetStream refuses. Its
// subjects become <prefix>.retired.out.>; what it holds stays readable. A
// deployment moved to groups by [Conn.MigrateGroups], or provisioned with
// groups by an earlier release (which kept EA_OUT), has one. Idempotent.
func (c *Conn) retireOutbox(ctx context.Context) error {
	n := c.names
	if n.Groups() == 1 {
		return nil
	}
	s, err := c.JetStream().Stream(ctx, n.OutboxStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream groups: read stream %s: %w", n.OutboxStream(), err)
	}
	sc := s.CachedInfo().Config
	if slices.Equal(sc.Subjects, []string{n.RetiredOutboxes()}) {
		return nil
	}
	if err := c.checkStreamPrefix(ctx, sc.Name); err != nil {
		return err
	}
	sc.Subjects = []string{n.RetiredOutboxes()}
	if _, err := c.JetStream().UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("stream groups: retire stream %s (the one outbox stream; the groups have their own): %w", sc.Name, err)
	}
	c.log.Info("retired the one outbox stream: outboxes are in the stream groups' outbox streams now", "stream", sc.Name, "retired_subjects", n.RetiredOutboxes(), "outputs_kept", s.CachedInfo().State.Msgs)
	return nil
}

// CheckLayout compares the stream group and partition counts this
// connection was configured with (those not left at 0) with the provisioned
// deployment's, and returns an error wrapping [ErrInvalidConfig] that names
// the deployment's when they differ: a client told the layout (because it
// may not read it, see [Conn.Adopt]) that is told wrong would read other
// streams and buckets than the deployment's. Nothing provisioned yet is no
// error; an error reading the layout (a user without permission to read the
// mailbox streams' info) is returned as it is, for the caller to weigh.
func (c *Conn) CheckLayout(ctx context.Context) error {
	g, p, found, err := c.provisionedLayout(ctx)
	if err != nil || !found {
		return err
	}
	var wrong []string
	if !c.unsetGroups && g != c.names.Groups() {
		wrong = append(wrong, fmt.Sprintf("%d stream groups", c.names.Groups()))
	}
	if !c.unsetPartitions && p != c.names.Partitions() {
		wrong = append(wrong, fmt.Sprintf("%d partitions", c.names.Partitions()))
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%w: the deployment has %d stream groups and %d mailbox partitions, and this connection was configured for %s: set them to the deployment's (or leave them unset to read them from it)", ErrInvalidConfig, g, p, strings.Join(wrong, " and "))
	}
	return nil
}

// provisionedLayout reads how the deployment's mailboxes are laid out: one
// stream (groups 1, partitions from its transform), stream groups (from the
// metadata of the stream holding partition 0), or nothing provisioned yet
// (found false).
func (c *Conn) provisionedLayout(ctx context.Context) (groups, partitions int, found bool, err error) {
	n := c.names
	s, err := c.JetStream().Stream(ctx, n.MailboxStream())
	switch {
	case err == nil:
		sc := s.CachedInfo().Config
		if p, ok := n.PartitionsOfTransform(transformDest(sc)); ok {
			return 1, p, true, nil
		}
		if len(sc.Subjects) > 0 && sc.Subjects[0] == n.MailboxIngest() {
			return 0, 0, false, c.matchPartitions(sc) // explains what is wrong
		}
		// Retired by MigrateGroups: the groups hold the mailboxes.
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return 0, 0, false, err
	}
	name, err := c.JetStream().StreamNameBySubject(ctx, n.prefix+".mbox.0._._")
	if errors.Is(err, jetstream.ErrStreamNotFound) || (err == nil && (name == "" || name == n.LegacyRecordsStream())) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	gs, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		return 0, 0, false, err
	}
	g, p, ok := groupsOfStream(gs.CachedInfo().Config)
	if !ok {
		return 0, 0, false, fmt.Errorf("%w: stream %s holds partition 0's mailboxes but does not say which stream group layout it belongs to: it was not provisioned by effectors (delete it or use another prefix)", ErrInvalidConfig, name)
	}
	return g, p, true, nil
}

// checkGroups fails when the deployment is provisioned with another stream
// group count than this connection's: changing it is a migration.
func (c *Conn) checkGroups(ctx context.Context) error {
	g, p, found, err := c.provisionedLayout(ctx)
	if err != nil || !found {
		return err
	}
	if (p != c.names.Partitions() || g != c.names.Groups()) &&
		(p == c.names.Partitions() || c.unsetPartitions) && (g == c.names.Groups() || c.unsetGroups) {
		// What differs was not configured but taken as a default: another
		// first process provisioned the deployment after Adopt looked.
		return errProvisionedMeanwhile
	}
	if p != c.names.Partitions() {
		return fmt.Errorf("%w: the deployment has %d mailbox partitions and this connection is configured for %d: the count is fixed at provisioning (set partitions to %d, or migrate as the README's operations section says)", ErrInvalidConfig, p, c.names.Partitions(), p)
	}
	if g == c.names.Groups() {
		return nil
	}
	if g == 1 {
		return fmt.Errorf("%w: the deployment has one mailbox stream (%s) and this connection is configured for %d stream groups: changing the layout is a migration: stop every node, then run ea-node once with --migrate and --stream-groups %d (EA_MIGRATE=true EA_STREAM_GROUPS=%d; from Go, bus.Conn.MigrateGroups), see docs/layout.md", ErrInvalidConfig, c.names.MailboxStream(), c.names.Groups(), c.names.Groups(), c.names.Groups())
	}
	return fmt.Errorf("%w: the deployment has %d stream groups and this connection is configured for %d: the count is fixed at provisioning (set stream groups to %d; only the move from one stream to groups is a supported migration, see docs/layout.md)", ErrInvalidConfig, g, c.names.Groups(), g)
}

// MailboxStreamOf returns the mailbox stream of stream group g.
func (c *Conn) MailboxStreamOf(ctx context.Context, g int) (jetstream.Stream, error) {
	if c.names.Groups() == 1 {
		return c.MailboxStream(ctx)
	}
	if g < 0 || g >= c.names.Groups() {
		return nil, fmt.Errorf("stream group %d: the deployment has groups 0-%d", g, c.names.Groups()-1)
	}
	name := c.names.MailboxStreamOf(g)
	s, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (was it provisioned?)", name, err)
	}
	if gs, p, ok := groupsOfStream(s.CachedInfo().Config); !ok || gs != c.names.Groups() || p != c.names.Partitions() {
		return nil, fmt.Errorf("%w: stream %s is not group %d of %d stream groups over %d partitions", ErrInvalidConfig, name, g, c.names.Groups(), c.names.Partitions())
	}
	return s, nil
}

// OutboxStreamOf returns the outbox stream of stream group g.
func (c *Conn) OutboxStreamOf(ctx context.Context, g int) (jetstream.Stream, error) {
	if c.names.Groups() == 1 {
		return c.OutboxStream(ctx)
	}
	if g < 0 || g >= c.names.Groups() {
		return nil, fmt.Errorf("stream group %d: the deployment has groups 0-%d", g, c.names.Groups()-1)
	}
	name := c.names.OutboxStreamOf(g)
	s, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (was it provisioned?)", name, err)
	}
	return s, nil
}

// StateBucketOf returns the state bucket of stream group g.
func (c *Conn) StateBucketOf(ctx context.Context, g int) (jetstream.KeyValue, error) {
	if g < 0 || g >= c.names.Groups() {
		return nil, fmt.Errorf("stream group %d: the deployment has groups 0-%d", g, c.names.Groups()-1)
	}
	name := c.names.StateBucketOf(g)
	kv, err := c.JetStream().KeyValue(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w (was it provisioned?)", name, err)
	}
	return kv, nil
}

// StateBuckets returns the state buckets, group 0 first.
func (c *Conn) StateBuckets(ctx context.Context) ([]jetstream.KeyValue, error) {
	out := make([]jetstream.KeyValue, c.names.Groups())
	for g := range out {
		kv, err := c.StateBucketOf(ctx, g)
		if err != nil {
			return nil, err
		}
		out[g] = kv
	}
	return out, nil
}

// unsupportedWithGroups is the error of a one-stream accessor (method, which
// returns the one thing what) asked for on a deployment with stream groups.
func (c *Conn) unsupportedWithGroups(method, what string) error {
	return fmt.Errorf("%w: Conn.%s: this deployment has %d stream groups, so no one %s holds them all (Conn.%sOf opens one group's; docs/layout.md says what supports groups)", ErrGroupsUnsupported, method, c.names.Groups(), what, method)
}

// mappingProbeTimeout bounds the wait for the probe of the account mapping.
const mappingProbeTimeout = 5 * time.Second

// ensureMapping makes sure publishes to mailboxes are mapped to their
// partition, as stream groups need: on an embedded server it adds the
// mapping to the account of this connection; then (embedded or not) it
// checks the mapping with a probe that no stream stores.
func (c *Conn) ensureMapping(ctx context.Context) error {
	src, dest := c.names.MailboxMapping()
	if c.server != nil {
		if err := c.server.mapForClient(c.NATS(), src, dest); err != nil {
			return err
		}
	}
	return c.probeMapping(ctx)
}

// probeMapping publishes a core NATS message to a mailbox subject of a kind
// no effector has, <prefix>.mbox._probe.<random>, and waits for it on the
// stored subject the mapping should turn it into. The message carries
// Nats-Expected-Stream naming no stream, so that the group stream that
// listens on the mapped subject refuses to store it.
func (c *Conn) probeMapping(ctx context.Context) error {
	nc := c.NATS()
	ref := records.Ref{Kind: "_probe", ID: strings.ToLower(nats.NewInbox()[7:])}
	src, dest := c.names.MailboxMapping()
	sub, err := nc.SubscribeSync(c.names.StoredMailbox(ref))
	if err != nil {
		return fmt.Errorf("probe the mailbox mapping: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("probe the mailbox mapping: %w", err)
	}
	msg := nats.NewMsg(c.names.Mailbox(ref))
	msg.Header.Set(jetstream.ExpectedStreamHeader, "_ea_probe_no_stream")
	if err := nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("probe the mailbox mapping: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, mappingProbeTimeout)
	defer cancel()
	if _, err := sub.NextMsgWithContext(ctx); err != nil {
		return fmt.Errorf("%w: %d stream groups need the account subject mapping %q -> %q on every server, in the account that publishes to mailboxes, and a publish to %s did not arrive as %s within %s (%v): add to the account in the nats-server config: mappings = { %q: %q } (see docs/layout.md)",
			ErrInvalidConfig, c.names.Groups(), src, dest, c.names.Mailbox(ref), c.names.StoredMailbox(ref), mappingProbeTimeout, err, src, dest)
	}
	return nil
}

// leaderWait bounds the wait for moved leaders in [Conn.SpreadLeaders].
const leaderWait = 10 * time.Second

// spreadItem is one stream [Conn.SpreadLeaders] places, with the share of
// the deployment's writes it takes.
type spreadItem struct {
	name     string
	weight   float64
	optional bool // may not exist (yet): skipped then
}

// spreadItems lists the streams whose leaders are spread, in the order they
// are placed: the groups' mailbox streams, outbox streams and state buckets
// (each weighing the group's share of the partitions), then the lease bucket
// and the timer stream, which take few writes.
func (c *Conn) spreadItems() []spreadItem {
	n := c.names
	var items []spreadItem
	share := func(g int) float64 { return float64(len(n.GroupPartitions(g))) / float64(n.Partitions()) }
	for g, s := range n.MailboxStreams() {
		items = append(items, spreadItem{name: s, weight: share(g)})
	}
	for g, s := range n.OutboxStreams() {
		items = append(items, spreadItem{name: s, weight: share(g)})
	}
	for g, b := range n.StateBuckets() {
		items = append(items, spreadItem{name: "KV_" + b, weight: share(g)})
	}
	return append(items,
		spreadItem{name: "KV_" + n.PlaceBucket(), weight: 0.05, optional: true},
		spreadItem{name: n.TimerStream(), weight: 0.05, optional: true})
}

// LeaderMove is a stream whose leader [Conn.SpreadLeaders] or
// [Conn.SpreadLeader] would move, or moved.
type LeaderMove struct {
	Stream, From, To string
	ready            bool // To is current: the step-down can be asked for
}

// leaderPlan walks the streams [Conn.spreadItems] lists and gives each the
// replica that leads the least weight so far (the current leader on a tie),
// among the replicas that are online. It returns every stream's leader now
// and the moves that would spread them (each ready when its target replica
// is current); steady is false when a replicated stream has no leader, a
// replica offline or a peer missing (a server away), when moving leaders
// would only add an election.
func (c *Conn) leaderPlan(ctx context.Context) (leaders map[string]string, moves []LeaderMove, steady bool, elected time.Time, err error) {
	leaders = map[string]string{}
	load := map[string]float64{}
	steady = true
	for _, it := range c.spreadItems() {
		s, err := c.JetStream().Stream(ctx, it.name)
		if err != nil {
			if it.optional && errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			return nil, nil, false, time.Time{}, fmt.Errorf("spread leaders: stream %s: %w", it.name, err)
		}
		cl := s.CachedInfo().Cluster
		if cl == nil || len(cl.Replicas) == 0 {
			continue
		}
		if cl.Leader == "" || len(cl.Replicas)+1 < s.CachedInfo().Config.Replicas {
			steady = false // no leader, or a peer not even listed yet
		}
		if cl.Leader == "" {
			continue
		}
		if cl.LeaderSince != nil && cl.LeaderSince.After(elected) {
			elected = *cl.LeaderSince
		}
		const eps = 1e-9
		best := cl.Leader
		current := map[string]bool{}
		for _, r := range cl.Replicas {
			if r.Offline {
				steady = false // a server away: moving a leader would only add an election
				continue
			}
			current[r.Name] = r.Current
			if load[r.Name] < load[best]-eps || (load[r.Name] < load[best]+eps && best != cl.Leader && r.Name < best) {
				best = r.Name
			}
		}
		load[best] += it.weight
		leaders[it.name] = cl.Leader
		if best != cl.Leader {
			// A replica a moment behind (under load, or catching up) is
			// placed all the same, so that the plan does not change with
			// every lag; the move waits until it is current.
			moves = append(moves, LeaderMove{Stream: it.name, From: cl.Leader, To: best, ready: current[best]})
		}
	}
	return leaders, moves, steady, elected, nil
}

// SpreadLeaders moves the leaders of the stream groups' mailbox streams,
// outbox streams and state buckets, and of the lease bucket and the timer
// stream, so that the servers lead equal shares of the deployment's writes:
// JetStream elects each stream's leader among its replicas on its own, and
// two groups led by one server would take that server's writes twice. Every
// record is about one write to each of three families (its mailbox, its
// output, its state document), so each group's stream of a family weighs
// the group's share of the partitions; the lease bucket and the timer stream
// weigh little. Walking the streams in that order, it gives each the replica
// that leads the least weight so far (the current leader on a tie) and asks
// the stream's leader to step down in favour of it (a preferred placement,
// nats-server 2.11+). It returns the leader of each stream afterwards. A
// stream that is not replicated, or a server that is not current, is left as
// it is. [Conn.Provision] calls it with several groups and more than one
// replica; nodes call [Conn.SpreadLeader] from time to time, which moves one
// leader at a time, so that the spread comes back after a server's restart.
func (c *Conn) SpreadLeaders(ctx context.Context) (map[string]string, error) {
	leaders, moves, _, _, err := c.leaderPlan(ctx)
	if err != nil {
		return nil, err
	}
	var asked []LeaderMove
	for _, m := range moves {
		if !m.ready {
			continue // its target is not current yet: the nodes move it later
		}
		if err := c.stepDown(ctx, m.Stream, m.To); err != nil {
			return nil, err
		}
		asked = append(asked, m)
	}
	deadline := time.Now().Add(leaderWait)
	for _, m := range asked {
		for {
			s, err := c.JetStream().Stream(ctx, m.Stream)
			if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" {
				leaders[m.Stream] = s.CachedInfo().Cluster.Leader
				if leaders[m.Stream] == m.To {
					break
				}
			}
			if time.Now().After(deadline) {
				c.log.Warn("a stream group's leader did not move where asked", "stream", m.Stream, "want", m.To, "leader", leaders[m.Stream])
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return leaders, nil
}

// SpreadLeader is one step of [Conn.SpreadLeaders]: when every replicated
// stream it places has a leader and no replica is offline, it asks the
// leader of the first stream that is not where the spread wants it, and
// whose wanted server is current, to step down in favour of that server,
// and returns the move; it returns a zero move when the leaders are spread
// or when no wanted server is current yet, and an error wrapping
// [ErrUnsteady] when the cluster is not steady: a server away (moving a
// leader then would only add an election), or a stream whose leader was
// elected less than calm ago (by the servers' clock, leader_since: after a
// server's restart or during a rolling restart, the writes waiting are
// worth more than the spread, and a step-down is an election of its own).
// It does not wait for the new leader. Call it again, a few seconds apart,
// until it returns a zero move.
func (c *Conn) SpreadLeader(ctx context.Context, calm time.Duration) (LeaderMove, error) {
	_, moves, steady, elected, err := c.leaderPlan(ctx)
	if err != nil {
		return LeaderMove{}, err
	}
	if !steady {
		return LeaderMove{}, fmt.Errorf("spread leaders: %w", ErrUnsteady)
	}
	if since := time.Since(elected); since < calm {
		return LeaderMove{}, fmt.Errorf("spread leaders: a leader was elected %s ago: %w", since.Round(time.Millisecond), ErrUnsteady)
	}
	for _, m := range moves {
		if !m.ready {
			continue
		}
		if err := c.stepDown(ctx, m.Stream, m.To); err != nil {
			return LeaderMove{}, err
		}
		return m, nil
	}
	return LeaderMove{}, nil
}

// stepDown asks stream's leader to step down in favour of server.
func (c *Conn) stepDown(ctx context.Context, stream, server string) error {
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": server}})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := c.NATS().RequestWithContext(ctx, c.names.StreamStepDown(stream), body)
	if err != nil {
		return fmt.Errorf("spread leaders: step down the leader of %s for %s: %w", stream, server, err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("spread leaders: step down the leader of %s: answer %q: %w", stream, msg.Data, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("spread leaders: step down the leader of %s for %s: %s (%d)", stream, server, resp.Error.Description, resp.Error.Code)
	}
	return nil
}

// OneStream returns nil when the deployment keeps every mailbox in one
// stream and every state document in one bucket, and an error wrapping
// [ErrGroupsUnsupported] that names what when it has stream groups: by this
// connection's configuration, or, for a connection that was not told (a
// client that does not provision), by what is provisioned. Parts of the
// runtime that read the mailbox stream or the state bucket by name call it
// before they start.
func (c *Conn) OneStream(ctx context.Context, what string) error {
	g := c.names.Groups()
	if g == 1 && c.unsetGroups {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if pg, _, found, err := c.provisionedLayout(ctx); err == nil && found {
			g = pg
		}
	}
	if g > 1 {
		return fmt.Errorf("%w: %s reads one mailbox stream and one state bucket, and this deployment has %d stream groups (see docs/layout.md)", ErrGroupsUnsupported, what, g)
	}
	return nil
}

// explainNotFound adds to the error of a one-stream accessor whose stream or
// bucket was not found that the deployment has stream groups, if it has.
func (c *Conn) explainNotFound(ctx context.Context, err error) error {
	if c.names.Groups() > 1 {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if g, _, found, lerr := c.provisionedLayout(ctx); lerr == nil && found && g > 1 {
		return fmt.Errorf("%w: the deployment has %d stream groups and this connection was not told: set bus.Config.Groups to %d (or 0 and call Provision), see docs/layout.md", err, g, g)
	}
	return err
}
