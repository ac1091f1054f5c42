// Package store is the record store: it reads the record log (the mailbox
// and outbox streams) back by record id, effector, process, owner, type and
// time, lists kinds, effectors and orchestrations, and watches state
// documents and orchestrations. It serves Go
// callers through [Client] and every other language through a NATS micro
// service of JSON request-reply endpoints, so a gateway, a CLI and a web view
// ask the same thing the same way ([Remote] is the Go client of that
// service; [Client] and [Remote] are both a [Reader]).
//
// # What is indexed, and how
//
// Publishers keep writing plain subjects; nothing about a record changes.
// A [Server] runs an indexer: one durable consumer ([IndexerName]) on each
// of the mailbox and outbox streams, reading headers only, shared by every
// server (JetStream hands each record to one of them), with a window of
// records open so that it indexes what has arrived, up to 500 records at a
// time. For every record it writes an index entry under each value it is
// indexed by:
//
//	<PREFIX>_IDX_PROC_<shard>  <prefix>.idx.proc.<shard>.<process>  every record with that EA-Process
//	<PREFIX>_IDX_TYPE          <prefix>.idx.type.<type>             every record with that EA-Type
//	<PREFIX>_IDX_ID            <prefix>.idx.id.<id>                 every record, by its id
//	<PREFIX>_IDX_OWNER_<shard> <prefix>.idx.owner.<shard>.<owner>   every record with that EA-Owner
//
// The process index is spread over 16 streams (shard: FNV-1a of the
// process modulo 16). JetStream finds the next message of a subject by
// walking the message block from the previous one, so a sparse process
// costs a walk of the blocks it appears in; a shard holds a sixteenth of
// the entries. A record id is its own subject: a lookup is JetStream's
// per-subject index, constant in the size of the log.
//
// (a process or type that is not a plain subject token is written as '~'
// and its base64url form). An entry names the record's stream and sequence
// and repeats its subject, id, type, process, owner and stored time, so
// filters apply to entries and only returned records are read. The entries
// of one batch that share a subject are one index message, in a compact
// binary form (at most 64 KiB and 4,096 entries a message); the id index's
// messages of a batch are written as one JetStream fast batch where the
// server allows it (nats-server 2.14 and later). A record redelivered to
// the indexer is indexed twice: queries return it once per page, counts of
// an index count it twice. An index written by an older server (one JSON
// entry per message) is read as it is, and its cursors continue.
//
// Effector queries need no index: a mailbox is one stored subject
// (<prefix>.mbox.<partition>.<kind>.<id>, see [bus.Names.StoredMailbox])
// and an outbox another, and JetStream finds a subject's messages through
// its per-subject state. Queries on the whole log, or from a time, read the
// streams themselves (a time is found by JetStream's own time lookup).
//
// Every read is a JetStream direct get ($JS.API.DIRECT.GET.<stream>) of a
// batch of messages matching one subject from a sequence: one round trip,
// no consumer created. Records an index page points at are loaded with
// pipelined direct gets, again one round trip for the page.
//
// # Queries
//
// A [Query] picks its source by the most selective field set: Process, then
// Effector, then Owner, then Type, then the log; every other field filters. Results
// come a page at a time ([Query.Limit], at most [MaxLimit]) with an opaque
// cursor made of stream sequences, so it stays valid while records arrive:
// oldest first, a cursor at the end reads what arrives later; newest first
// it pages back in time. A page whose filters match rarely may be short or
// empty with More set: it examined its budget of entries and says where to
// go on. Results from one stream are in stream order; mailbox and outbox
// records are merged by the time their streams stored them, except in
// process and type queries, which return records in the order the indexer
// wrote them (with one server indexing, each stream's records in stream
// order; with several, their batches may interleave).
//
// Index queries (process, owner, type, id) see a record once the indexer
// has indexed it, milliseconds after it is stored while a server runs;
// [Client.IndexLag] says how far behind it is.
//
// # Effectors, kinds, watches
//
// [Client.Kinds] reads the node heartbeats in the placement bucket.
// [Client.Effectors] pages through a kind's state documents in the order
// they were last written (a cursor of the state bucket's sequence: an
// effector updated while a caller pages is listed again later, never
// missed). [Client.Watch] follows one effector or a whole kind from a
// revision of the state bucket, so a watcher that reconnects resumes where
// it stopped; with stream groups a kind's documents are in several buckets,
// each with revisions of its own, and a kind-wide watch resumes from a
// revision per bucket ([WatchOptions].Positions, built from each event's
// [StateEvent].Bucket and Revision). [Client.Orchestrations] and [Client.WatchOrchestrations] do
// the same for the orchestration bucket (by status, name and owner).
//
// # The log tells the whole story
//
// Besides what publishers send and logic emits, the log holds the
// runtime's own records: state records (actor.Kind.StateRecords), the end
// record of a terminated effector, and the status records supervisors write
// after every change of an orchestration, in its process. So
// Query{Process: id} is an orchestration's history. See docs/store.md.
//
// # Retention
//
// The index streams follow the log's retention (bus.Retention): its age
// limit, and the sum of the log streams' size limits. Queries skip entries
// whose record the log dropped; Get of such a record is [ErrNotFound].
//
// # Service
//
// The service is named <prefix>_store; its endpoints take and answer JSON
// (see [QueryRequest], [PageJSON], [RecordJSON], [GetRequest],
// [EffectorsRequest]):
//
//	<prefix>.store.get        {"id"}                        → record
//	<prefix>.store.query      {"process","owner","effector":"k/i","box","type","since","until","order","limit","cursor"} → {"records","cursor","more"}
//	<prefix>.store.count      same as query                 → {"count"}
//	<prefix>.store.kinds      {}                            → {"kinds":[{"kind","nodes","beat"}]}
//	<prefix>.store.effectors  {"kind","status","owner","limit","cursor"} → {"effectors","cursor","more"}
//	<prefix>.store.orchestrations {"status","name","owner","limit","cursor"} → {"orchestrations","cursor","more"}
//
// Requests are decoded strictly (unknown fields and trailing data are
// errors). Errors use the NATS micro error headers with HTTP-like codes
// (400 bad request, 404 not found, 503 unavailable) and the header
// Ea-Store-Error naming the kind: bad_cursor, page_too_large, unknown_kind,
// invalid, not_found, unavailable, internal. In Go every error matches a
// sentinel of errors.go with errors.Is.
package store
