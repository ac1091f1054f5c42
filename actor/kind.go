package actor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/retry"
)

// Logic is an effector's behaviour: given the record in hand (ctx.Record())
// and the current state, it returns the new state. Records it sends or emits
// through ctx are published only if it succeeds.
//
// What the result does to the record:
//
//   - nil error: outputs are published, the new state is written, the
//     record is acknowledged;
//   - an error: the record is retried with backoff ([RetryPolicy]); when the
//     attempts run out it goes to dead letters with the error in EA-Error;
//   - an error marked [Permanent] (the one mark of every package, so
//     graph.Permanent too; a core error whose code retrying cannot fix;
//     one Kind.Retry.RetryOn refuses; [UnknownType]; a payload that
//     ctx.Decode cannot decode): dead letters at once;
//   - a panic: dead letters at once with the panic value; the stack is
//     logged.
//
// Logic must not keep ctx or the state after it returns. It may block (for
// example on an HTTP call) and should honour ctx's cancellation.
type Logic[S any] func(ctx *Context, state S) (S, error)

// Kind defines a kind of effector with state type S. S is stored as msgpack
// and shown as JSON, both naming fields by their json tags.
type Kind[S any] struct {
	// Name is the kind, a subject token: [A-Za-z0-9_-]{1,128}.
	Name string
	// Initial is the state of an effector created without one.
	Initial S
	// Version is the version of the state type S, stored in every state
	// document the kind writes (key "version"). Default 0, which means 1.
	// Raise it by one when S changes in a way documents written before do
	// not decode into as they should, and add the step from the previous
	// version to Upgrades. See "State versions" in the package doc.
	Version int
	// Upgrades take a state written at an older version up to Version,
	// one step per version ([UpgradeFrom]): a document of an older version
	// is upgraded when loaded and stored at Version by the next state
	// write. Required above version 1: the step from Version-1, and one
	// from each version down to the oldest documents still stored (older
	// steps may be dropped once none is left). A failing step makes the
	// effector's records wait, as a document of a newer version does.
	Upgrades []Upgrade
	// Logic handles one record at a time. Required.
	Logic Logic[S]
	// Types are the record types (EA-Type) the logic handles, at most
	// [MaxTypes]; empty: it does not say (any type). They are advertised by
	// the kind endpoint ([Client.Kind], ea kinds), and senders that ask
	// (ea send, the gateway) refuse other types before anything is
	// published. The node itself does not check them: a record of another
	// type reaches the logic (published with nats pub, say), which refuses
	// it with [UnknownType] as before.
	Types []string
	// Describe, when set, adds to what the kind endpoint says about the kind
	// (package remote sets it: its workers, who waits for them).
	Describe Describe
	// Retry is the retry policy for failing logic ([RetryPolicy]). Zero
	// fields take defaults.
	Retry RetryPolicy
	// MaxPayload is the largest payload accepted, in bytes; larger records go
	// to dead letters. Default 256 KiB.
	MaxPayload int
	// Accept lists the payload content types the kind accepts
	// (records.ContentMsgpack, records.ContentJSON); others go to dead
	// letters. Default: both.
	Accept []string
	// Window is how many records of one partition of the kind's mailboxes
	// the node holds unacknowledged at once (the partition consumer's
	// MaxAckPending), shared by the effectors of the partition. A
	// high-priority record overtakes the normal records its effector holds.
	// Default 256.
	Window int
	// Overflow is how many records one effector may hold before it reads the
	// rest of its mailbox through a consumer of its own, so that its backlog
	// does not take its partition's Window from its neighbours. Default
	// Window/2; negative: never.
	Overflow int
	// MaxBatch is how many held records of one effector are applied in one
	// batch: logic runs on each in order, their outputs are published
	// together, then one state write and the acknowledgements. Batches
	// are pipelined two deep (see the package documentation). Default 64;
	// 1 applies one record per state write, never pipelined: a record's
	// logic runs only once the record before it is written.
	MaxBatch int
	// AckWait is how long the server waits for an acknowledgement before
	// redelivering; the node extends it while logic runs. Default 30s.
	AckWait time.Duration
	// MaxDeliveries dead-letters a record delivered this many times, which
	// means it took its node down with it again and again. Default 10.
	MaxDeliveries int
	// Timeout bounds one attempt of the logic. Default 0: no limit.
	Timeout time.Duration
	// StateRecords, when true, writes a [TypeState] record with the new
	// state document to the effector's outbox after every state write that
	// applies records, so that the log shows each transition. It costs a
	// publish per write (BENCHMARKS.md, "State records"). Default false.
	StateRecords bool
}

// RetryPolicy says how often and how fast failing logic is retried: it is
// [retry.Policy], the one policy type of every package. A record being
// retried blocks its mailbox: order is kept. Zero fields take
// [retry.Default]'s: 4 attempts, the first included; 100ms before the first
// retry, doubling (Multiplier 2) up to 5s (MaxBackoff); no Jitter. An error
// RetryOn refuses goes to dead letters at once, as a [Permanent] one does.
type RetryPolicy = retry.Policy

// Definition is a kind ready to host on a node: a [Kind] of any state type.
type Definition interface {
	spec() (*kindSpec, error)
}

// kindSpec is a Kind with its state type erased: state travels as msgpack.
type kindSpec struct {
	name          string
	retry         RetryPolicy
	maxPayload    int
	accept        []string
	window        int
	overflow      int
	maxBatch      int
	ackWait       time.Duration
	maxDeliveries int
	timeout       time.Duration
	stateRecords  bool
	versions      versions
	types         []string
	describe      Describe
	// initial returns the msgpack of the initial state.
	initial func() ([]byte, error)
	// fromJSON converts a JSON state (as sent to the create endpoint) to
	// msgpack, checking that it fits the state type.
	fromJSON func([]byte) ([]byte, error)
	// run decodes state, runs the logic and encodes the new state.
	run func(ctx *Context, state []byte) ([]byte, error)
}

func (k Kind[S]) spec() (*kindSpec, error) {
	if err := records.ValidateKind(k.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if k.Logic == nil {
		return nil, invalidf("kind %s: Logic is required", k.Name)
	}
	policy := k.Retry.Or(retry.Default())
	var err error
	s := &kindSpec{
		name:          k.Name,
		retry:         policy,
		maxPayload:    orDefault(k.MaxPayload, 256<<10),
		accept:        k.Accept,
		window:        orDefault(k.Window, 256),
		overflow:      k.Overflow,
		maxBatch:      orDefault(k.MaxBatch, 64),
		ackWait:       orDefault(k.AckWait, 30*time.Second),
		maxDeliveries: orDefault(k.MaxDeliveries, 10),
		timeout:       k.Timeout,
		stateRecords:  k.StateRecords,
		describe:      k.Describe,
	}
	if s.types, err = checkTypes(k.Name, k.Types); err != nil {
		return nil, err
	}
	switch {
	case policy.Attempts < 1:
		return nil, invalidf("kind %s: Retry.Attempts %d must be at least 1", k.Name, policy.Attempts)
	case policy.Validate() != nil:
		return nil, invalidf("kind %s: Retry: %v", k.Name, policy.Validate())
	case s.maxPayload < 0, s.window < 1, s.maxBatch < 1, s.ackWait < time.Second, s.maxDeliveries < 1, s.timeout < 0:
		return nil, invalidf("kind %s: MaxPayload must be >= 0, Window >= 1, MaxBatch >= 1, AckWait >= 1s, MaxDeliveries >= 1, Timeout >= 0", k.Name)
	}
	switch {
	case s.overflow == 0:
		s.overflow = max(s.window/2, 1)
	case s.overflow < 0:
		s.overflow = 0 // never
	case s.overflow > s.window:
		return nil, invalidf("kind %s: Overflow %d must not exceed Window %d (an effector never holds more than its partition's window)", k.Name, s.overflow, s.window)
	}
	if s.versions, err = newVersions(k.Name, k.Version, k.Upgrades); err != nil {
		return nil, err
	}
	if len(s.accept) == 0 {
		s.accept = []string{records.ContentMsgpack, records.ContentJSON}
	}
	for _, ct := range s.accept {
		if ct != records.ContentMsgpack && ct != records.ContentJSON {
			return nil, invalidf("kind %s: Accept %q: want %q or %q", k.Name, ct, records.ContentMsgpack, records.ContentJSON)
		}
	}
	initial := k.Initial
	s.initial = func() ([]byte, error) { return codec.Marshal(initial) }
	s.fromJSON = func(data []byte) ([]byte, error) {
		var v S
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, invalidf("state does not fit kind %s: %v", k.Name, err)
		}
		return codec.Marshal(v)
	}
	s.run = k.run
	if policy.RetryOn != nil {
		s.run = func(ctx *Context, state []byte) ([]byte, error) {
			b, err := k.run(ctx, state)
			if err != nil && !policy.Retryable(err) {
				err = Permanent(err)
			}
			return b, err
		}
	}
	return s, nil
}

// run decodes the stored state (msgpack; empty for the zero value), runs the
// logic on it and encodes the new state: what a node does with every record,
// and what [Kind.Apply] does too.
func (k Kind[S]) run(ctx *Context, state []byte) ([]byte, error) {
	var v S
	if len(state) > 0 {
		if err := codec.Unmarshal(state, &v); err != nil {
			return nil, Permanent(fmt.Errorf("stored state of %s does not decode into %T (did the state type change?): %w", ctx.self, v, err))
		}
	}
	next, err := k.Logic(ctx, v)
	if err != nil {
		return nil, err
	}
	b, err := codec.Marshal(next)
	if err != nil {
		return nil, Permanent(fmt.Errorf("encode new state of %s: %w", ctx.self, err))
	}
	return b, nil
}

func (s *kindSpec) accepts(contentType string) bool {
	if contentType == "" {
		contentType = records.ContentMsgpack
	}
	return slices.Contains(s.accept, contentType)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
