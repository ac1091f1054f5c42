// Package actor runs effectors: durable, message-driven agents on NATS
// JetStream.
//
// An effector is named by a kind and an id ([records.Ref], written
// <kind>/<id>). Its kind ([Kind]) gives it a state type and a [Logic]
// function; a [Node] hosts kinds and drives their effectors; a [Client]
// creates, terminates, inspects and talks to effectors from any process.
//
// # Records in, records out
//
// Each effector has a mailbox subject (<prefix>.mbox.<kind>.<id>) in the
// mailbox stream, which stores it in one of a fixed number of partitions
// (see package bus). A node reads each partition it owns through one durable
// consumer and dispatches the records in-process to their effectors; each
// effector takes one record at a time, in stream order, and runs the logic
// with the current state:
//
//	run logic → publish outputs → compare-and-set the state document → ack
//
// Several records waiting for one effector are applied in a batch
// ([Kind].MaxBatch): logic on each in order, all outputs published, one
// state write with the last sequence, then the acks. Batches are pipelined
// two deep: while the server stores one batch's outputs, the next batch's
// logic runs on its new state and its outputs go out; the first batch is
// written and acknowledged before the second. When the first cannot be
// written, both are taken again on the document as written.
//
// Outputs sent through [Context.Send], [Context.Emit] and [Context.Reply] are
// held until the logic succeeds and carry the id <input id>:<n>, so a retry or
// a redelivery after a crash never publishes them twice (within the stream's
// duplicate window).
//
// # The state document
//
// The state lives in the KV bucket <prefix>_state under <kind>.<id> as a
// [Document]: status, the user state (msgpack, fields named by json tags),
// the stream sequence of the last record applied (Seq), the time and the last
// error. A redelivered record at or below Seq is acknowledged without running
// the logic: state transitions are effectively once.
//
// # State versions
//
// The document also records the version of the kind's state type its state
// was written with ([Document].Version, key "version", absent for 1). A kind
// declares its version and the steps from older ones ([Kind].Version,
// [Kind].Upgrades, [UpgradeFrom]): an older document is upgraded when its
// effector is loaded and stored at the new version by the next state write. A
// newer one (a node of an older version during a rolling upgrade) is refused:
// the effector's records wait, unacknowledged and never dead-lettered, until a
// node of that version reads the partition; an upgrade that fails makes them
// wait too ([ErrStateVersion]). [Kind.UpgradeState] runs the steps in a test.
//
// # Failures
//
// A record that cannot be decoded, is too large or of a content type the kind
// does not accept goes to dead letters (<prefix>.dead.<kind>.<id>) at once.
// Each dead letter carries EA-Dead-Reason, one of: decode, content_type,
// oversize, rejected, failed, panic, redelivered, cancelled, no_effector,
// terminated, reply_forbidden (its EA-Reply names a subject records may not
// go to), output_too_large (its outputs exceed the server's limits),
// state_too_large (the new state document would) and corrupt_state (the
// effector's state document does not decode or names another effector:
// [ErrCorruptState]; reset it with [Client.Reset] or terminate it); and
// EA-Stream, EA-Seq and EA-Subject, where the original is. A dead letter is
// written whatever the record's size: what does not fit the server's limits
// is left out and EA-Truncated says so (see [DeadLetter]). A write that can
// never succeed (too large, malformed) is never retried as if NATS were down.
//
// # Where records go
//
// A record never steers the node. Replies and sends go only to mailboxes,
// the effector's own outbox and subjects in [Options].ReplySubjects (NATS
// request inboxes by default); never to $-subjects ($JS, $KV, $O, $SYS, …),
// other effectors' outboxes, dead letters, control or orchestration subjects
// ([bus.Routes] decides). A record whose EA-Reply is not allowed goes to dead
// letters before the logic runs; an output logic adds to a forbidden subject,
// or one too large for the server, fails with [ErrForbidden] or [ErrTooLarge],
// even if the logic ignores the error. A state document whose kind and id
// are not those of its key is never written, and reading one is an error
// ([ErrStateMismatch]).
// Logic that returns an error is retried with backoff ([RetryPolicy]) while
// the record keeps its place; then the record goes to dead letters. Errors
// marked [Permanent] and panics go there at once. See [Logic] for the whole
// contract. The effector then shows [StatusError] until the next success.
//
// # Priority
//
// A node holds up to [Kind].Window records of a partition and each effector
// takes the high-priority ones it holds (EA-Priority: high) first, so they
// overtake normal records that wait. The state document's Ahead field keeps
// the records applied out of order, so a crash never skips or repeats one.
//
// # Placement
//
// Run several nodes against one NATS server or cluster and they share the
// partitions with no coordinator. Each node announces itself with a heartbeat
// in the placement bucket (<prefix>_place); the partitions of kind k are
// spread over the live nodes hosting k by bounded-load rendezvous hashing, at
// most ceil(P/N) each, the same owners computed by every node. A node is dead
// when its heartbeat is older than Options.HeartbeatTTL, or at once when its
// connection is gone (a probe of its liveness subject finds no responder).
// A lease part.<kind>.<n> in the bucket names the node reading each
// partition; the owner takes a free lease, or one of a dead node, and resets
// the partition's consumer to its ack floor before reading, so whatever the
// former reader held unacknowledged comes again in order. An effector is
// loaded (its state document read) on its first record and dropped from
// memory after Options.IdleTimeout without records. See the README for the
// whole design and its metrics.
//
// # Streaming and cancelling
//
// [Context.EmitNow] publishes a record at once, for partial results while logic
// runs. A record of type [TypeCancel] cancels the logic running on a record of
// the same process (context.Cause is [ErrCancelled]). Terminating an effector
// cancels the logic in hand too (cause matching [ErrCancelled] and
// [ErrTerminated]), and the end record is written once it stopped (see
// interrupt.go).
//
// # Following outboxes
//
// [Client.Subscribe] follows one effector's outbox, [Client.SubscribeKind]
// every effector of a kind; each record carries its position, its stream
// and sequence (Record.Stream, Record.Seq). With stream groups a kind's
// outboxes are in several streams, so a kind's subscription resumes from a
// position per stream, a [Positions] vector ([FromPositions];
// [Positions.Seen] keeps it, [Positions.String] and [ParsePositions] carry
// it across processes, [Client.OutboxPositions] starts one at the end of
// every stream). It works with one stream too (docs/layout.md, "Resuming
// across groups").
//
// # Timers
//
// [Context.After], [Context.At], [Context.Every] and [Context.Cron] ask for a
// record later (once, or as a reminder until [Context.CancelTimer]); like
// outputs they take effect only if the logic succeeds, once. They are
// JetStream message schedules in the timer stream, forwarded into mailboxes
// by the nodes (timer.go, timer_node.go, docs/timers.md); [Client.SetTimer],
// [Client.CancelTimer] and [Client.Timers] do the same from outside.
//
// # Middleware
//
// Behaviour that cuts across kinds (services, tracing, metrics) wraps a
// kind's logic as typed [Middleware]: kind.With(mw...) runs the first
// middleware outermost. Middleware that hands the logic a derived
// context.Context calls it with [Context.WithContext]; both Contexts hold
// the same attempt's outputs. core.Middleware (core.Wrap) gives logic the
// agent services this way.
//
// # Testing logic
//
// [Kind.Apply] runs a kind's logic on one record without NATS, exactly as a
// node runs it: the state goes through msgpack before and after the logic
// (fields tagged `json:"-"` and unexported fields arrive zero, an `any` field
// holds what msgpack decodes), the record through its NATS form, and records
// a node would dead-letter before the logic runs fail with a [Permanent]
// error. A test that passes with Apply sees what production sees.
//
// # Control
//
// Nodes serve a NATS micro service (named after the prefix) with endpoints
// <prefix>.ctl.create.<kind>, <prefix>.ctl.terminate.<kind>,
// <prefix>.ctl.reset.<kind>, <prefix>.ctl.state.<kind>,
// <prefix>.ctl.activate.<kind> and <prefix>.ctl.replay.<kind>, taking JSON,
// so any NATS client can create effectors, read their state as JSON, load
// them ahead of traffic and check them against their record log;
// [Client.Create], [Client.Terminate], [Client.Reset], [Client.Activate] and
// [Client.Replay] use them. [Node.Replay] (replay.go) is the event-sourcing
// check: the state rebuilt from the mailbox with the kind's logic, compared
// with the stored one. Request bodies are decoded strictly (one JSON object, no unknown
// or repeated field, at most [MaxControlRequest] bytes); an error reply
// carries a code and a reason (header EA-Error-Reason) that the client turns
// into the typed error ([*ControlError], matching [ErrNotFound] and the
// others with errors.Is), never by reading its text.
// Reset writes a fresh, valid state document over a corrupt one
// ([ErrCorruptState]), keeping the cursor when the old document decodes and
// otherwise starting after the last record stored in the mailbox, so nothing
// applied is applied again. A kind no running node hosts answers 503
// ([ErrNoHost]).
package actor
