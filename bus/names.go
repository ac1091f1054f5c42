package bus

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/effectors/effectors/records"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "ea"

// Names derives the subjects, streams and buckets of one deployment from its
// prefix. The zero value is not useful; use [NewNames] or [Conn.Names].
type Names struct {
	prefix     string
	upper      string
	partitions int
	groups     int // stream groups; 1: one mailbox stream and one state bucket
}

// DefaultPartitions is the number of mailbox partitions a deployment has
// when none is configured. It is fixed at provisioning: every effector
// belongs to partition hash(kind, id) mod P forever, so changing it is a
// migration (see the README).
const DefaultPartitions = 64

// MaxPartitions bounds the partition count.
const MaxPartitions = 4096

// NewNames returns the names for prefix, which must be a single subject token
// (see [records.ValidateKind]); an empty prefix means [DefaultPrefix].
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := records.ValidateKind(prefix); err != nil {
		return Names{}, fmtInvalid("prefix %q: must be one subject token of A-Z a-z 0-9 _ -", prefix)
	}
	return Names{prefix: prefix, upper: strings.ToUpper(strings.ReplaceAll(prefix, "-", "_")), partitions: DefaultPartitions, groups: 1}, nil
}

// WithPartitions returns n with p mailbox partitions (1 to [MaxPartitions],
// and at least its stream groups).
func (n Names) WithPartitions(p int) (Names, error) {
	if p < 1 || p > MaxPartitions {
		return n, fmtInvalid("partitions %d: must be 1-%d", p, MaxPartitions)
	}
	if p < n.groups {
		return n, fmtInvalid("partitions %d: fewer than the %d stream groups (each group holds at least one partition)", p, n.groups)
	}
	n.partitions = p
	return n, nil
}

// Partitions returns the number of mailbox partitions.
func (n Names) Partitions() int { return n.partitions }

// Partition returns the partition of r's mailbox: the FNV-1a hash of its
// kind and id (concatenated) modulo the partition count, exactly what the
// mailbox stream's subject transform {{partition(P,1,2)}} computes.
func (n Names) Partition(r records.Ref) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.Kind))
	_, _ = h.Write([]byte(r.ID))
	return int(h.Sum32() % uint32(n.partitions))
}

// StoredMailbox returns the subject r's mailbox records have in the mailbox
// stream: <prefix>.mbox.<partition>.<kind>.<id>. Publishers never write it:
// the stream's subject transform adds the partition token to what they
// publish on [Names.Mailbox]. Read a mailbox from the stream with it.
func (n Names) StoredMailbox(r records.Ref) string {
	return n.prefix + ".mbox." + strconv.Itoa(n.Partition(r)) + "." + r.Kind + "." + r.ID
}

// PartitionFilter is the stored subject filter of partition p of kind's
// mailboxes: <prefix>.mbox.<p>.<kind>.*.
func (n Names) PartitionFilter(kind string, p int) string {
	return n.prefix + ".mbox." + strconv.Itoa(p) + "." + kind + ".*"
}

// KindMailboxes is the stored subject filter of every mailbox of kind:
// <prefix>.mbox.*.<kind>.*.
func (n Names) KindMailboxes(kind string) string {
	return n.prefix + ".mbox.*." + kind + ".*"
}

// MailboxIngest is the subject filter the mailbox stream listens on and
// transforms: <prefix>.mbox.*.*.
func (n Names) MailboxIngest() string { return n.prefix + ".mbox.*.*" }

// MailboxTransform is the destination of the mailbox stream's subject
// transform: <prefix>.mbox.{{partition(P,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}.
func (n Names) MailboxTransform() string {
	return n.prefix + ".mbox.{{partition(" + strconv.Itoa(n.partitions) + ",1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
}

// PartitionsOfTransform returns the partition count a mailbox transform
// destination names, and false when dest is not one [Names.MailboxTransform]
// makes.
func (n Names) PartitionsOfTransform(dest string) (int, bool) {
	rest, ok := strings.CutPrefix(dest, n.prefix+".mbox.{{partition(")
	if !ok {
		return 0, false
	}
	num, tail, ok := strings.Cut(rest, ",")
	if !ok || tail != "1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}" {
		return 0, false
	}
	p, err := strconv.Atoi(num)
	return p, err == nil && p >= 1
}

// StoredMailboxOf parses a stored mailbox subject
// (<prefix>.mbox.<partition>.<kind>.<id>) into the effector and partition.
// ok is false when subject is not one; the ref may still be invalid (check
// it with Validate), and the partition may not be the ref's (compare it with
// [Names.Partition]): the stream stores what publishers sent.
func (n Names) StoredMailboxOf(subject string) (r records.Ref, partition int, ok bool) {
	return n.partitionedOf("mbox", subject)
}

// partitionedOf parses <prefix>.<area>.<partition>.<kind>.<id> (a stored
// mailbox subject, or a grouped outbox subject) into the effector and the
// partition token, which must be a plain non-negative number.
func (n Names) partitionedOf(area, subject string) (r records.Ref, partition int, ok bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+"."+area+".")
	if !ok {
		return r, 0, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return r, 0, false
	}
	p, err := strconv.Atoi(parts[0])
	if err != nil || p < 0 || strconv.Itoa(p) != parts[0] {
		return r, 0, false
	}
	return records.Ref{Kind: parts[1], ID: parts[2]}, p, true
}

// Prefix returns the subject prefix.
func (n Names) Prefix() string { return n.prefix }

// Mailbox returns the subject of r's mailbox: <prefix>.mbox.<kind>.<id>.
func (n Names) Mailbox(r records.Ref) string { return n.prefix + ".mbox." + r.Kind + "." + r.ID }

// Outbox returns the subject r emits on: <prefix>.out.<kind>.<id> with one
// stream group; with several, <prefix>.out.<partition>.<kind>.<id>, the
// partition being r's mailbox partition (see [Names.StoredMailbox]), so that
// the outbox is stored in r's group (see [Names.OutboxStreamFor]). The
// runtime is the only publisher of outboxes and publishes there itself:
// outboxes need no account mapping.
func (n Names) Outbox(r records.Ref) string {
	if n.Groups() > 1 {
		return n.prefix + ".out." + strconv.Itoa(n.Partition(r)) + "." + r.Kind + "." + r.ID
	}
	return n.prefix + ".out." + r.Kind + "." + r.ID
}

// KindOutboxes is the subject filter of every outbox of kind:
// <prefix>.out.<kind>.* with one stream group, <prefix>.out.*.<kind>.* with
// several (each group's outbox stream holds its partitions' part).
func (n Names) KindOutboxes(kind string) string {
	if n.Groups() > 1 {
		return n.prefix + ".out.*." + kind + ".*"
	}
	return n.prefix + ".out." + kind + ".*"
}

// Dead returns the subject of r's dead letters: <prefix>.dead.<kind>.<id>.
func (n Names) Dead(r records.Ref) string { return n.prefix + ".dead." + r.Kind + "." + r.ID }

// RefOf returns the effector a mailbox, outbox or dead-letter subject belongs
// to, and false when subject is none of those. Stored mailbox subjects and,
// with stream groups, grouped outbox subjects (with the partition token, see
// [Names.StoredMailbox] and [Names.Outbox]) are mailbox and outbox subjects
// too when the token is the effector's partition.
func (n Names) RefOf(subject string) (records.Ref, bool) {
	rest, ok := strings.CutPrefix(subject, n.prefix+".")
	if !ok {
		return records.Ref{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) == 4 && parts[0] == "mbox" {
		r, p, ok := n.StoredMailboxOf(subject)
		return r, ok && r.Validate() == nil && n.Partition(r) == p
	}
	if len(parts) == 4 && parts[0] == "out" {
		// Only with stream groups does the runtime write this form.
		r, p, ok := n.GroupedOutboxOf(subject)
		return r, ok && n.Groups() > 1 && r.Validate() == nil && n.Partition(r) == p
	}
	if len(parts) != 3 || (parts[0] != "mbox" && parts[0] != "out" && parts[0] != "dead") {
		return records.Ref{}, false
	}
	r := records.Ref{Kind: parts[1], ID: parts[2]}
	return r, r.Validate() == nil
}

// MailboxStream is the stream holding every mailbox (EA_MBOX), partitioned
// by its subject transform, when the deployment has one stream group; with
// several, see [Names.MailboxStreamOf].
func (n Names) MailboxStream() string { return n.upper + "_MBOX" }

// OutboxStream is the stream holding every outbox (EA_OUT) when the
// deployment has one stream group; with several, see
// [Names.OutboxStreamOf].
func (n Names) OutboxStream() string { return n.upper + "_OUT" }

// LegacyRecordsStream is the stream of the previous layout (EA_RECORDS),
// which held mailboxes and outboxes together with a consumer per effector.
// A deployment that still has it must be migrated; see [Conn.Provision].
func (n Names) LegacyRecordsStream() string { return n.upper + "_RECORDS" }

// PartitionConsumer is the durable consumer name of partition p of kind's
// mailboxes: <kind>~p<p>.
func (n Names) PartitionConsumer(kind string, p int) string {
	return kind + "~p" + strconv.Itoa(p)
}

// DeadStream is the stream holding dead letters (EA_DEAD).
func (n Names) DeadStream() string { return n.upper + "_DEAD" }

// StateBucket is the KV bucket of state documents (ea_state) when the
// deployment has one stream group; with several, see [Names.StateBucketOf].
func (n Names) StateBucket() string { return n.prefix + "_state" }

// OrchBucket is the KV bucket of orchestration state (ea_orch).
func (n Names) OrchBucket() string { return n.prefix + "_orch" }

// PlaceBucket is the KV bucket of placement (ea_place): node heartbeats
// (node.<node id>) and partition leases (part.<kind>.<partition>, naming the
// node that reads each).
func (n Names) PlaceBucket() string { return n.prefix + "_place" }

// NodeKey is node's heartbeat key in the placement bucket: node.<node id>.
func (n Names) NodeKey(node string) string { return "node." + node }

// NodeKeys is the filter of every heartbeat key in the placement bucket:
// node.*.
func (n Names) NodeKeys() string { return "node.*" }

// NodeOfKey is the node id of heartbeat key key (see [Names.NodeKey]), and
// false for a key that is not one.
func (n Names) NodeOfKey(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, "node.")
	return id, ok && id != "" && !strings.Contains(id, ".")
}

// LeaseKey is the key of the lease of partition num of kind in the
// placement bucket: part.<kind>.<num>.
func (n Names) LeaseKey(kind string, num int) string {
	return "part." + kind + "." + strconv.Itoa(num)
}

// LeaseKeys is the filter of every lease key in the placement bucket:
// part.>.
func (n Names) LeaseKeys() string { return "part.>" }

// LeaseOfKey is the kind and partition of lease key key (see
// [Names.LeaseKey]), and false for a key that is not one.
func (n Names) LeaseOfKey(key string) (kind string, num int, ok bool) {
	rest, ok := strings.CutPrefix(key, "part.")
	if !ok {
		return "", 0, false
	}
	kind, numText, ok := strings.Cut(rest, ".")
	if !ok || kind == "" {
		return "", 0, false
	}
	num, err := strconv.Atoi(numText)
	if err != nil || num < 0 || strconv.Itoa(num) != numText {
		return "", 0, false
	}
	return kind, num, true
}

// KeyBucket is the KV bucket of the runtime's secrets (ea_keys): the key
// nodes sign output record ids with (see [Conn.OutputKey]). Only nodes may
// read it; the client role of deploy/nats cannot.
func (n Names) KeyBucket() string { return n.prefix + "_keys" }

// StateKey is the key of r's state document: <kind>.<id>.
func (n Names) StateKey(r records.Ref) string { return r.Kind + "." + r.ID }

// Service is the name of the control micro service (the prefix itself).
func (n Names) Service() string { return n.prefix }

// Control is the subject of control operation op for kind:
// <prefix>.ctl.<op>.<kind>.
func (n Names) Control(op, kind string) string { return n.prefix + ".ctl." + op + "." + kind }

// Stored returns the stream that stores subject, a mailbox, outbox or
// dead-letter subject (or filter) as publishers write it, and the filter to
// read it there with: mailbox records are stored under their partition
// (<prefix>.mbox.<partition>.<kind>.<id>), so a mailbox filter becomes the
// partition's subject when kind and id are literal, and
// <prefix>.mbox.*.<kind>.<id> otherwise. ok is false for any other subject,
// and, with several stream groups, for a mailbox or outbox filter that is
// not one effector's (its records are in several streams). An outbox
// subject may be given in either form (<prefix>.out.<kind>.<id>, or with
// its partition token as [Names.Outbox] makes it with several groups).
func (n Names) Stored(subject string) (stream, filter string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.prefix+".")
	if !found {
		return "", "", false
	}
	area, tail, _ := strings.Cut(rest, ".")
	switch area {
	case "out":
		return n.storedOutbox(subject, tail)
	case "dead":
		return n.DeadStream(), subject, true
	case "mbox":
	default:
		return "", "", false
	}
	tokens := strings.Split(tail, ".")
	if n.Groups() > 1 {
		r := records.Ref{Kind: tokens[0]}
		if len(tokens) == 2 {
			r.ID = tokens[1]
		}
		if len(tokens) != 2 || r.Validate() != nil {
			return "", "", false
		}
		return n.MailboxStreamFor(r), n.StoredMailbox(r), true
	}
	switch {
	case len(tokens) == 1 && tokens[0] == ">":
		return n.MailboxStream(), subject, true
	case len(tokens) != 2:
		return "", "", false
	}
	r := records.Ref{Kind: tokens[0], ID: tokens[1]}
	if r.Validate() == nil {
		return n.MailboxStream(), n.StoredMailbox(r), true
	}
	return n.MailboxStream(), n.prefix + ".mbox.*." + tokens[0] + "." + tokens[1], true
}

// The runtime's other subjects, streams, services and keys. Every name the
// runtime puts on the wire is built here, so that the contract is read in
// one file.

// Mailboxes is the subject filter of every mailbox: <prefix>.mbox.>.
func (n Names) Mailboxes() string { return n.prefix + ".mbox.>" }

// Outboxes is the subject filter of every outbox: <prefix>.out.>.
func (n Names) Outboxes() string { return n.prefix + ".out.>" }

// DeadLetters is the subject filter of every dead letter: <prefix>.dead.>.
func (n Names) DeadLetters() string { return n.prefix + ".dead.>" }

// StrayDead is the dead-letter subject of a record stored in kind's
// mailboxes whose subject names no valid effector: <prefix>.dead.<kind>._
// ('_' is not a valid id on its own; see [records.ValidateID]).
func (n Names) StrayDead(kind string) string { return n.prefix + ".dead." + kind + "._" }

// RetiredMailboxes is the subject filter the one mailbox stream (EA_MBOX) is
// moved to by [Conn.MigrateGroups]: <prefix>.retired.mbox.>.
func (n Names) RetiredMailboxes() string { return n.prefix + ".retired.mbox.>" }

// RetiredOutboxes is the subject filter the one outbox stream (EA_OUT) is
// moved to when the deployment has stream groups (see [Conn.Provision]):
// <prefix>.retired.out.>.
func (n Names) RetiredOutboxes() string { return n.prefix + ".retired.out.>" }

// LegacySubjects is the subject filter the previous layout's stream is moved
// to while it is migrated: <prefix>.legacy.>.
func (n Names) LegacySubjects() string { return n.prefix + ".legacy.>" }

// StateStream is the stream behind the state bucket: KV_<prefix>_state.
func (n Names) StateStream() string { return "KV_" + n.StateBucket() }

// StateSubject is the subject r's state document is stored under in
// [Names.StateStreamFor]: $KV.<bucket>.<kind>.<id>, the bucket being
// [Names.StateBucketFor] (<prefix>_state with one stream group).
func (n Names) StateSubject(r records.Ref) string {
	return "$KV." + n.StateBucketFor(r) + "." + n.StateKey(r)
}

// StateFilter is the subject filter of every state document of kind in
// [Names.StateStream]: $KV.<prefix>_state.<kind>.*.
func (n Names) StateFilter(kind string) string { return "$KV." + n.StateBucket() + "." + kind + ".*" }

// DirectGet is JetStream's direct get API subject of stream:
// $JS.API.DIRECT.GET.<stream> (the stream must allow direct gets).
func (n Names) DirectGet(stream string) string { return "$JS.API.DIRECT.GET." + stream }

// StreamStepDown is JetStream's API subject that asks stream's leader to
// step down: $JS.API.STREAM.LEADER.STEPDOWN.<stream>.
func (n Names) StreamStepDown(stream string) string {
	return "$JS.API.STREAM.LEADER.STEPDOWN." + stream
}

// StreamLeaderElected is the subject of JetStream's advisories that a
// stream (any, hence the wildcard) has a new leader:
// $JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>.
func (n Names) StreamLeaderElected() string {
	return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>"
}

// OrchStream is the stream behind the orchestration bucket: KV_<prefix>_orch.
func (n Names) OrchStream() string { return "KV_" + n.OrchBucket() }

// OrchFilter is the filter of every orchestration in [Names.OrchStream]:
// $KV.<prefix>_orch.>.
func (n Names) OrchFilter() string { return "$KV." + n.OrchBucket() + ".>" }

// HostControl is the internal subject of control operation op answered by
// the nodes hosting kind (a queue group): <prefix>.ctl.host.<op>.<kind>.
// Public control requests for a kind a node does not host are forwarded
// there.
func (n Names) HostControl(op, kind string) string {
	return n.prefix + ".ctl.host." + op + "." + kind
}

// NodeControl is the internal subject of control operation op for kind
// answered by node alone: <prefix>.ctl.node.<node>.<op>.<kind>. A request
// that must reach the node reading a partition (activate) is forwarded
// there.
func (n Names) NodeControl(node, op, kind string) string {
	return n.prefix + ".ctl.node." + node + "." + op + "." + kind
}

// NodeAlive is the internal subject on which node answers while its
// connection is open: <prefix>.ctl.node.<node>.alive. A request to it that
// the server answers "no responders" means the node's connection is gone
// (placement then need not wait for its heartbeat to expire).
func (n Names) NodeAlive(node string) string { return n.prefix + ".ctl.node." + node + ".alive" }

// OrchService is the name of the orchestration micro service: <prefix>-orch.
func (n Names) OrchService() string { return n.prefix + "-orch" }

// Orch is the subject of orchestration operation op: <prefix>.orch.<op>.
func (n Names) Orch(op string) string { return n.prefix + ".orch." + op }

// Orchestrations is the subject filter of every orchestration endpoint:
// <prefix>.orch.*.
func (n Names) Orchestrations() string { return n.prefix + ".orch.*" }

// PipelineService is the name of the micro service nodes offer their
// pipelines under: <prefix>_pipelines.
func (n Names) PipelineService() string { return n.prefix + "_pipelines" }

// Pipeline is the subject pipeline name is served on:
// <prefix>.pipe.<name>.
func (n Names) Pipeline(name string) string { return n.prefix + ".pipe." + name }

// StoreService is the name of the record store's micro service:
// <prefix>_store.
func (n Names) StoreService() string { return n.prefix + "_store" }

// Store is the subject of record store operation op: <prefix>.store.<op>.
func (n Names) Store(op string) string { return n.prefix + ".store." + op }

// IndexStream is the record store's index stream of index kind:
// <PREFIX>_IDX_<KIND> (upper case).
func (n Names) IndexStream(kind string) string { return n.upper + "_IDX_" + strings.ToUpper(kind) }

// Index is the subject of a record store index entry:
// <prefix>.idx.<kind>.<token>… (each token already a valid subject token).
func (n Names) Index(kind string, tokens ...string) string {
	s := n.prefix + ".idx." + kind
	for _, t := range tokens {
		s += "." + t
	}
	return s
}

// IndexFilter is the subject filter of a record store index stream:
// <prefix>.idx.<kind>.<token>….> (tokens may be empty).
func (n Names) IndexFilter(kind string, tokens ...string) string {
	return n.Index(kind, tokens...) + ".>"
}

// StrayConsumer is the durable consumer of the mailbox stream that reads
// kind's records stored under no partition: <kind>~strays. A publish to a
// mailbox subject with a wildcard token (<prefix>.mbox.counter.* or
// <prefix>.mbox.counter.>) is stored as sent, since the stream's subject
// transform does not apply to it, and no partition reads it; nodes hosting
// the kind dead-letter what this consumer delivers.
func (n Names) StrayConsumer(kind string) string { return kind + "~strays" }

// StrayFilter is the subject filter of [Names.StrayConsumer]:
// <prefix>.mbox.<kind>.>. Stored mailbox subjects have the partition number
// where it has the kind, so it matches only records stored under no
// partition — unless kind is all digits, when it would match partition
// <kind>: ok is false then.
func (n Names) StrayFilter(kind string) (filter string, ok bool) {
	if strings.Trim(kind, "0123456789") == "" {
		return "", false
	}
	return n.prefix + ".mbox." + kind + ".>", true
}

// VectorBucket is the default KV bucket of the vector store (package
// core/vector): <prefix>_vectors.
func (n Names) VectorBucket() string { return n.prefix + "_vectors" }
