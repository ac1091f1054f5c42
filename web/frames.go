package web

import (
	"encoding/json"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// ProtocolVersion is the version of the frame protocol, announced in the
// welcome frame.
const ProtocolVersion = 1

// Frame types a client sends.
const (
	TypeAuth        = "auth"
	TypeSend        = "send"
	TypeSubscribe   = "subscribe"
	TypeUnsubscribe = "unsubscribe"
	TypeState       = "state"     // request: one state document; also the type of state events
	TypeKinds       = "kinds"     // request: the kinds nodes host
	TypeEffectors   = "effectors" // request: a page of effectors of a kind
	TypeQuery       = "query"     // request: a page of records from the record store
	TypeGet         = "get"       // request: one record by id
	TypeCreate      = "create"
	TypeTerminate   = "terminate"
	TypeOrchStart   = "orch.start"
	TypeOrchStatus  = "orch.status"
	TypeOrchInput   = "orch.input"
	TypeOrchCancel  = "orch.cancel"
	TypePing        = "ping"
)

// Frame types the gateway sends.
const (
	TypeWelcome       = "welcome"
	TypeAck           = "ack"
	TypeResult        = "result"
	TypeError         = "error"
	TypeSubscribed    = "subscribed"
	TypeUnsubscribed  = "unsubscribed"
	TypeRecord        = "record"        // outbox and mailbox subscriptions
	TypeRecords       = "records"       // records subscriptions: a page with its cursor
	TypeDead          = "dead"          // dead-letter subscriptions
	TypeOrchestration = "orchestration" // orchestration subscriptions
	TypePong          = "pong"
)

// Topics of a subscribe frame.
const (
	TopicOutbox        = "outbox"        // what an effector (or every effector of a kind) emits, from a stream sequence
	TopicMailbox       = "mailbox"       // what an effector receives, from a stream sequence
	TopicState         = "state"         // state documents of an effector or a kind, from a revision
	TopicRecords       = "records"       // the log of a process or an effector (both boxes), history then live, from a cursor
	TopicDead          = "dead"          // dead letters of an effector or of all, from a stream sequence
	TopicOrchestration = "orchestration" // an orchestration's record (or all), from a revision
)

// head is what every client frame has.
type head struct {
	Type string `json:"type"`
	Req  string `json:"req,omitempty"`
	Sub  string `json:"sub,omitempty"`
}

// OutRecord is the record a send frame carries.
type OutRecord struct {
	// ID is the record id (Nats-Msg-Id). Set it so that a re-send after a
	// reconnect is stored once; empty: the gateway makes one.
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
	// Payload is any JSON value, sent as application/json.
	Payload  json.RawMessage `json:"payload,omitempty"`
	Process  string          `json:"process,omitempty"`
	Cause    string          `json:"cause,omitempty"`
	Priority string          `json:"priority,omitempty"`
	// Time is the sender's time (EA-Time); empty: when the gateway got it.
	Time *time.Time `json:"time,omitempty"`
	// Owner is the record's EA-Owner. Leave it out: the gateway sets it to
	// the connection's identity. Only an admin may name another owner (to
	// act for a user, e.g. when replaying its dead letter).
	Owner string `json:"owner,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the send
	// (traceparent, tracestate): the record continues the caller's trace.
	// Empty: with tracing on the gateway starts a trace.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// SendFrame is {"type":"send"}.
type SendFrame struct {
	Type   string    `json:"type"`
	Req    string    `json:"req"`
	To     string    `json:"to"` // "<kind>/<id>"
	Record OutRecord `json:"record"`
	// AnyType sends a record of a type the kind does not declare (see
	// [CodeUndeclaredType]) all the same.
	AnyType bool `json:"any_type,omitempty"`
}

// SubscribeFrame is {"type":"subscribe"}.
type SubscribeFrame struct {
	Type  string `json:"type"`
	Req   string `json:"req,omitempty"`
	Sub   string `json:"sub"`
	Topic string `json:"topic"`
	// Effector "<kind>/<id>" (outbox, mailbox, state, records, dead).
	Effector string `json:"effector,omitempty"`
	// Kind: every effector of it (outbox, state).
	Kind string `json:"kind,omitempty"`
	// Process (records).
	Process string `json:"process,omitempty"`
	// ID of an orchestration (orchestration; empty: all).
	ID string `json:"id,omitempty"`
	// From is the stream sequence (outbox, mailbox, dead) or revision
	// (state, orchestration) to start at, inclusive. 0 is the same as
	// absent: what is stored after the "subscribed" frame (outbox, mailbox,
	// dead), or the current values then changes (state, orchestration).
	// Sequences and revisions start at 1: from 1 is the whole history.
	From uint64 `json:"from,omitempty"`
	// Positions resumes a kind-wide outbox or state subscription at a
	// position per stream (outbox: {"<outbox stream>": sequence}) or per
	// bucket (state: {"<state bucket>": revision}), each the next one to
	// read: the last "seq" (or "revision") received from that "stream"
	// (or "bucket") + 1. A stream it does not name is read from its first
	// record; a bucket it does not name starts with its current documents.
	// {} reads every stream from its start. Not with From; with stream
	// groups it is the only way to resume a kind (From is one stream's),
	// and with one stream it works too (one entry).
	Positions actor.Positions `json:"positions,omitempty"`
	// Cursor resumes a records subscription (the cursor of the last
	// records frame received); empty: from the beginning of the log.
	Cursor string `json:"cursor,omitempty"`
}

// ErrorFrame is {"type":"error"}.
type ErrorFrame struct {
	Type  string `json:"type"`
	Req   string `json:"req,omitempty"`
	Sub   string `json:"sub,omitempty"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// AckFrame is {"type":"ack"}: the record is stored in the mailbox stream.
type AckFrame struct {
	Type   string `json:"type"`
	Req    string `json:"req"`
	ID     string `json:"id"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	// Duplicate: the record was stored before (a re-send), Seq is where.
	Duplicate bool `json:"duplicate,omitempty"`
}

// SubscribedFrame is {"type":"subscribed"}: the subscription is in place.
type SubscribedFrame struct {
	Type string `json:"type"`
	Req  string `json:"req,omitempty"`
	Sub  string `json:"sub"`
	// Positions is where each stream of a kind-wide outbox subscription
	// starts (the next sequence it delivers): a vector naming every stream,
	// to keep up to date from the record frames and resume with. Absent
	// for other topics.
	Positions actor.Positions `json:"positions,omitempty"`
}

// RecordFrame is {"type":"record"} of outbox and mailbox subscriptions.
// Stream and Seq are the record's position: resume after it with from
// Seq+1 (one stream), or with positions holding Stream: Seq+1.
type RecordFrame struct {
	Type   string           `json:"type"`
	Sub    string           `json:"sub"`
	Stream string           `json:"stream"`
	Seq    uint64           `json:"seq"`
	Record store.RecordJSON `json:"record"`
}

// RecordsFrame is {"type":"records"} of records subscriptions: one page of
// the log. Cursor resumes after it; Live is set once the subscription has
// caught up with the log (history delivered).
type RecordsFrame struct {
	Type    string             `json:"type"`
	Sub     string             `json:"sub"`
	Records []store.RecordJSON `json:"records"`
	Cursor  string             `json:"cursor"`
	Live    bool               `json:"live"`
}

// DeadFrame is {"type":"dead"}.
type DeadFrame struct {
	Type string `json:"type"`
	Sub  string `json:"sub"`
	DeadLetter
}

// DeadLetter is a dead letter as dead frames and the dead.list request show
// it.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the dead-letter stream (resume
	// with from: seq+1).
	Seq uint64 `json:"seq"`
	// ID is the dead letter's own id, "dead:<record id>"; Record.ID is the
	// record's.
	ID       string `json:"id"`
	Effector string `json:"effector"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
	// MailboxSeq and MailboxStream: where the original record is.
	MailboxSeq    uint64           `json:"mailbox_seq,omitempty"`
	MailboxStream string           `json:"mailbox_stream,omitempty"`
	Truncated     string           `json:"truncated,omitempty"`
	Stored        time.Time        `json:"stored"`
	Record        store.RecordJSON `json:"record"`
}

// StateFrame is {"type":"state"} of state subscriptions. Bucket and
// Revision are the change's position: resume after it with from
// Revision+1 (one bucket), or with positions holding Bucket: Revision+1.
type StateFrame struct {
	Type     string          `json:"type"`
	Sub      string          `json:"sub"`
	Bucket   string          `json:"bucket"`
	Revision uint64          `json:"revision"`
	Effector string          `json:"effector"`
	Deleted  bool            `json:"deleted,omitempty"`
	Document json.RawMessage `json:"document,omitempty"`
}

// OrchestrationFrame is {"type":"orchestration"}.
type OrchestrationFrame struct {
	Type     string `json:"type"`
	Sub      string `json:"sub"`
	Revision uint64 `json:"revision"`
	ID       string `json:"id"`
	Deleted  bool   `json:"deleted,omitempty"`
	// Orchestration is the orchestration as <prefix>.orch.status answers
	// it (absent when Deleted).
	Orchestration *supervisor.Orchestration `json:"orchestration,omitempty"`
}

// WelcomeFrame is the first frame the gateway sends once the client is
// authorized.
type WelcomeFrame struct {
	Type string `json:"type"`
	// Req is the req of the auth frame it answers (absent after header
	// authentication or on a gateway without authentication).
	Req              string `json:"req,omitempty"`
	Version          int    `json:"version"`
	Prefix           string `json:"prefix"`
	MaxFrame         int64  `json:"max_frame"`
	MaxSubscriptions int    `json:"max_subscriptions"`
	SendBuffer       int    `json:"send_buffer"`
	// User is the identity the connection acts as (EA-Owner of what it
	// sends, creates and starts); absent on a gateway without
	// authentication. Role is "admin" (sees everything) or "user" (sees
	// what carries its name).
	User string `json:"user,omitempty"`
	Role Role   `json:"role"`
}
