// Package bus is the runtime's connection to NATS: it connects by URL or
// starts an embedded nats-server with JetStream, names the subjects, streams
// and buckets of the wire contract, and provisions them idempotently.
//
// # Connecting
//
// [Connect] with an empty [Config.URL] starts an embedded server (JetStream on,
// file storage in [Config.StoreDir], clients accepted on [Config.Listen]) and
// connects to it; with a URL it connects to an existing server or cluster. The
// connection reconnects forever; [Conn.Close] drains it and stops the embedded
// server.
//
// # Names
//
// [Names] derives every subject, stream and bucket name from the prefix
// (default "ea"):
//
//	ea.mbox.<kind>.<id>   mailbox of effector <kind>/<id>     (stream EA_MBOX,
//	                      stored as ea.mbox.<partition>.<kind>.<id>)
//	ea.out.<kind>.<id>    records the effector emitted        (stream EA_OUT)
//	ea.dead.<kind>.<id>   dead letters                        (stream EA_DEAD)
//	ea_state              KV bucket of state documents, key <kind>.<id>
//	ea_orch               KV bucket of orchestration state
//	ea.ctl.<op>.<kind>    control endpoints of the "ea" micro service
//	ea.ctl.host.<op>.<kind>, ea.ctl.node.<node>.<op>.<kind>
//	                      internal: forwarded control requests
//	ea.orch.<op>          orchestration endpoints ("ea-orch" micro service)
//	ea.store.<op>, ea.idx.… the record store's endpoints and indexes
//	ea.pipe.<name>        pipelines ("ea_pipelines" micro service)
//	ea.logic.<kind>       requests to the workers of a remote kind (queue
//	                      group; see package remote)
//	ea_place              KV bucket of placement: node.<id>, part.<kind>.<p>
//
// Every name the runtime puts on the wire is built by a method of [Names];
// no package concatenates subjects of its own.
//
// # Partitions
//
// The mailbox stream listens on <prefix>.mbox.*.* and its subject transform
// stores every record under <prefix>.mbox.<partition>.<kind>.<id>, the
// partition being FNV-1a(kind + id) mod [Config.Partitions] — what
// [Names.Partition] computes. Publishers write the plain mailbox subject;
// readers of the stream use [Names.StoredMailbox], [Names.PartitionFilter]
// or [Names.Stored]. The count is fixed at provisioning ([Conn.MailboxStream]
// refuses another), and a store of the previous layout (EA_RECORDS) is
// refused with [ErrLegacyLayout] until [Conn.Migrate] moves it.
//
// # Stream groups
//
// With [Config.Groups] G > 1 (docs/layout.md) partition p's mailboxes are in
// stream group p mod G: mailbox stream [Names.MailboxStreamOf], outbox stream
// [Names.OutboxStreamOf] and state bucket [Names.StateBucketOf] of their
// own, whose leaders [Conn.SpreadLeaders] puts on different servers.
// Publishers keep writing the plain mailbox subject; the account subject
// mapping [Names.MailboxMapping] adds the partition token before any stream
// sees the record (the embedded server gets it from [Conn.Provision]; an
// outside server from its operator). Outboxes carry the partition token
// too ([Names.Outbox]); nodes publish there themselves. The count is fixed at provisioning;
// [Conn.MigrateGroups] moves a one-stream deployment to groups. Parts that
// read one stream refuse groups with [ErrGroupsUnsupported] ([Conn.OneStream]).
//
// # Where records may go
//
// [Routes] (from [Names.Routes]) is the one place that decides where a
// record may be sent: mailboxes, the sender's own outbox, and subjects an
// operator allows ([DefaultReplySubjects]); never $-subjects or the
// runtime's other subjects. [MaxHeaderBytes], [Conn.MaxPayload] and
// [HeaderSize] give the server's size limits; [Unpublishable] and [TooLarge]
// tell a write that can never succeed from an outage.
//
// # Publishing on the hot path
//
// [Publisher] publishes to a stream and waits for the acknowledgement, as
// jetstream's PublishMsg does, with one shared reply subscription and
// without encoding/json for the usual answer: the runtime's synchronous
// writes (an effector's single output, its state's compare-and-set) go
// through it. BENCHMARKS.md has what it saves.
//
// # Provisioning
//
// [Conn.Provision] creates or updates the streams and buckets. It is safe to
// call from many nodes at once: a node that loses the race to create a stream
// updates it to the same configuration instead. The records stream allows
// [Config.MaxConsumers] consumers (default 1,000,000): nats-server caps a
// stream at 1,000 consumers unless the stream says otherwise, and every
// effector is a consumer.
package bus
