package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
)

// Replay is the event-sourcing check: it rebuilds an effector's state from
// its record log and compares it with the stored state.
//
// The log is the effector's mailbox, which the mailbox stream keeps after
// processing (limits retention). Replay reads the state document, then the
// mailbox records of the effector in stream order up to the document's Seq
// (and those in its Ahead list), and applies the kind's logic to each,
// starting from the state the effector was created with, exactly as a node
// would but publishing nothing: outputs, streamed records (EmitNow) and
// replies are dropped. The result is compared with the document's state.
//
// What is applied, and what is not:
//
//   - A record the live run sent to dead letters (any reason: undecodable,
//     rejected, failed after its retries, cancelled, sent before the
//     effector was created…) was not applied: its dead letter in the
//     dead-letter stream, by the record's stream sequence (EA-Seq), tells
//     replay to skip it too.
//   - Records above the document's Seq that are not in Ahead have not been
//     applied yet: not replayed.
//   - The starting state: the create request's, when the oldest revision
//     of the document the state bucket still keeps shows no record applied
//     (Seq 0); otherwise the kind's Initial, as the log cannot tell, and the
//     report says so (From). A ReplayRequest can give the state to start
//     from.
//
// Limits, which make a replay differ although nothing is wrong:
//
//   - Records applied out of stream order: high-priority records that
//     overtook others are replayed in stream order. Logic whose result
//     depends on the order of such records replays differently.
//   - A reset (control endpoint reset) replaces the state outside the log.
//   - Logic that is not a function of the record and the state: reading
//     the clock, random numbers, calls to other services (an LLM), or a
//     context cancelled by a cancel record while the logic still succeeded.
//     Replay runs the logic again, so such calls happen again.
//   - Records or dead letters removed by the streams' retention limits (age,
//     size) are missing from the log: Truncated says when the mailbox
//     stream no longer starts at sequence 1.
//
// A replay reads the whole mailbox of one effector and runs its logic once
// per record: it costs what processing the records cost, without the
// writes (BENCHMARKS.md, "Replay"). Through the control endpoint it must
// finish within the node's 30 s for a control request (10 s when the
// request reached a node that does not host the kind and was forwarded):
// replay very long logs in-process with [Node.Replay] and a context of
// your own. Run it on a node that hosts the kind (the replay control
// endpoint, [Client.Replay], `ea replay <kind>/<id>`) or in-process
// ([Node.Replay]).

// opReplay is the control operation of replay: <prefix>.ctl.replay.<kind>.
const opReplay = "replay"

// ReplayRequest is the JSON body of a replay request.
type ReplayRequest struct {
	ID string `json:"id"`
	// State, when set, is the state to start from (JSON), instead of the
	// one the effector was created with.
	State json.RawMessage `json:"state,omitempty"`
}

// Where a replay started from ([ReplayReport].From).
const (
	// ReplayFromCreated: the state the effector was created with, read from
	// the oldest revision of its document the state bucket keeps.
	ReplayFromCreated = "created"
	// ReplayFromInitial: the kind's Initial state, because the document's
	// history no longer shows the create (a create with a state of its own
	// makes the replay differ: give it in the request).
	ReplayFromInitial = "initial"
	// ReplayFromGiven: the state given in the request.
	ReplayFromGiven = "given"
)

// ReplayReport is what a replay found.
type ReplayReport struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Seq and Ahead are the stored document's: the records replayed.
	Seq   uint64   `json:"seq"`
	Ahead []uint64 `json:"ahead,omitempty"`
	// From is where the replay started: ReplayFromCreated,
	// ReplayFromInitial or ReplayFromGiven.
	From string `json:"from"`
	// Applied counts the records whose logic ran; Skipped those the live
	// run sent to dead letters.
	Applied int `json:"applied"`
	Skipped int `json:"skipped"`
	// Equal reports whether the replayed state equals the stored one (the
	// msgpack of both decoded and compared as values: map order and integer
	// widths do not matter). Difference names the first difference, by path
	// (keys sorted), when not.
	Equal      bool   `json:"equal"`
	Difference string `json:"difference,omitempty"`
	// FailedSeq and Failure are set when the logic failed on a record the
	// live run applied: the replay stopped there.
	FailedSeq uint64 `json:"failed_seq,omitempty"`
	Failure   string `json:"failure,omitempty"`
	// Truncated: the mailbox stream no longer starts at sequence 1, so
	// records of this effector may have been removed by its limits.
	Truncated bool `json:"truncated,omitempty"`
	// Stored and Replayed are the two states as JSON.
	Stored   json.RawMessage `json:"stored"`
	Replayed json.RawMessage `json:"replayed"`
}

// Replay rebuilds ref's state from its record log with the logic of its
// kind, which this node must host, and compares it with the stored state
// (see above). It publishes nothing and writes nothing. Errors:
// [ErrInvalid] for a ref or a state that does not fit, [ErrNotFound] for an
// effector never created, [ErrCorruptState], [ErrNoHost] when this node
// does not host the kind.
func (n *Node) Replay(ctx context.Context, ref records.Ref, opts ...ReplayOption) (ReplayReport, error) {
	var o replayOpts
	for _, opt := range opts {
		opt(&o)
	}
	if err := ref.Validate(); err != nil {
		return ReplayReport{}, failf(ErrInvalid, "%s", service.Text(err.Error()))
	}
	n.mu.Lock()
	k := n.kinds[ref.Kind]
	n.mu.Unlock()
	if k == nil {
		return ReplayReport{}, failf(ErrNoHost, "node %s does not host kind %q: replay on a node that does", n.opts.NodeID, ref.Kind)
	}
	if n.states == nil {
		return ReplayReport{}, failf(ErrNotLoaded, "node %s is not running yet: retry", n.opts.NodeID)
	}
	key := n.names.StateKey(ref)
	ent, err := n.states.Get(ctx, key)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return ReplayReport{}, failf(ErrNotFound, "effector %s not found", ref)
	case errors.Is(err, ErrCorruptState):
		return ReplayReport{}, failf(ErrCorruptState, "%s: %s", cutText(err.Error()), n.repairHint(ref))
	case err != nil:
		return ReplayReport{}, fmt.Errorf("replay %s: read state: %w", ref, err)
	}
	doc := ent.Value
	if doc.State, err = k.versions.upgrade(ref, doc.State, doc.StateVersion()); err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: the stored state: %w", ref, err)
	}
	rep := ReplayReport{ID: ref.ID, Kind: ref.Kind, Seq: doc.Seq, Ahead: doc.Ahead}

	cur, from, err := n.replayStart(ctx, k, key, o.state)
	if err != nil {
		return ReplayReport{}, err
	}
	rep.From = from
	dead, err := n.deadSeqs(ctx, ref)
	if err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: read dead letters: %w", ref, err)
	}
	cur, err = n.replayLog(ctx, k, ref, doc, dead, cur, &rep)
	if err != nil {
		return ReplayReport{}, err
	}
	rep.Equal, rep.Difference, err = compareStates(doc.State, cur)
	if err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: %w", ref, err)
	}
	if rep.Failure != "" {
		rep.Equal = false
		if rep.Difference == "" {
			rep.Difference = fmt.Sprintf("replay stopped at record %d: %s", rep.FailedSeq, rep.Failure)
		}
	}
	if rep.Stored, err = stateJSON(doc.State); err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: stored state: %w", ref, err)
	}
	if rep.Replayed, err = stateJSON(cur); err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: replayed state: %w", ref, err)
	}
	return rep, nil
}

// ReplayOption adjusts a replay.
type ReplayOption func(*replayOpts)

type replayOpts struct {
	state json.RawMessage
}

// ReplayFrom starts the replay from state (JSON, as a create request
// gives it) instead of the state the effector was created with.
func ReplayFrom(state json.RawMessage) ReplayOption {
	return func(o *replayOpts) { o.state = state }
}

// replayStart returns the state a replay starts from and where it comes
// from.
func (n *Node) replayStart(ctx context.Context, k *kindSpec, key string, given json.RawMessage) ([]byte, string, error) {
	if len(given) > 0 && string(given) != "null" {
		b, err := k.fromJSON(given)
		if err != nil {
			return nil, "", failf(ErrInvalid, "%s", service.Text(err.Error()))
		}
		return b, ReplayFromGiven, nil
	}
	hist, err := n.states.of(key).History(ctx, key)
	if err == nil && len(hist) > 0 && !hist[0].Deleted && hist[0].Value.Seq == 0 && len(hist[0].Value.Ahead) == 0 {
		first := hist[0].Value
		b, err := k.versions.upgrade(first.Ref(), first.State, first.StateVersion())
		if err != nil {
			return nil, "", fmt.Errorf("the state the effector was created with: %w", err)
		}
		return b, ReplayFromCreated, nil
	}
	b, err := k.initial()
	if err != nil {
		return nil, "", fmt.Errorf("encode the initial state of kind %s: %w", k.name, err)
	}
	return b, ReplayFromInitial, nil
}

// deadSeqs returns the mailbox sequences of ref's records the live run sent
// to dead letters.
func (n *Node) deadSeqs(ctx context.Context, ref records.Ref) (map[uint64]bool, error) {
	seqs := map[uint64]bool{}
	mailbox := n.names.MailboxStreamFor(ref)
	err := n.readAll(ctx, n.names.DeadStream(), n.names.Dead(ref), 0, func(m jetstream.Msg) bool {
		h := m.Headers()
		if s := h.Get(records.HeaderStream); s != "" && s != mailbox {
			return true
		}
		if seq, err := strconv.ParseUint(h.Get(records.HeaderSeq), 10, 64); err == nil {
			seqs[seq] = true
		}
		return true
	})
	return seqs, err
}

// replayLog applies the logic to ref's mailbox records that doc says were
// applied and dead does not list, from state cur, and returns the state.
func (n *Node) replayLog(ctx context.Context, k *kindSpec, ref records.Ref, doc Document, dead map[uint64]bool, cur []byte, rep *ReplayReport) ([]byte, error) {
	last := highestApplied(doc)
	if last == 0 {
		return cur, nil
	}
	stream, err := n.conn.JetStream().Stream(ctx, n.names.MailboxStreamFor(ref))
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", ref, err)
	}
	rep.Truncated = stream.CachedInfo().State.FirstSeq > 1
	var failure error
	err = n.readAll(ctx, n.names.MailboxStreamFor(ref), n.names.StoredMailbox(ref), last, func(m jetstream.Msg) bool {
		meta, err := m.Metadata()
		if err != nil {
			failure = err
			return false
		}
		seq := meta.Sequence.Stream
		if !doc.applied(seq) {
			return seq < last
		}
		if dead[seq] {
			rep.Skipped++
			return seq < last
		}
		rec, err := records.FromMsg(n.names.Mailbox(ref), m.Headers(), m.Data())
		if err != nil {
			rep.FailedSeq, rep.Failure = seq, "the record does not decode, and has no dead letter: "+err.Error()
			return false
		}
		rec.Subject, rec.Seq = n.names.Mailbox(ref), seq
		if rec.ID == "" {
			rec.ID = "s" + strconv.FormatUint(seq, 10)
		}
		next, err := n.replayOne(ctx, k, ref, rec, cur)
		if err != nil {
			rep.FailedSeq, rep.Failure = seq, err.Error()
			return false
		}
		cur = next
		rep.Applied++
		return seq < last
	})
	if err == nil {
		err = failure
	}
	if err != nil {
		return nil, fmt.Errorf("replay %s: read the mailbox: %w", ref, err)
	}
	return cur, nil
}

// replayOne runs the logic on rec and state as a node does, retrying a
// failure the kind's RetryPolicy retries (with its backoff), with nothing
// published.
func (n *Node) replayOne(ctx context.Context, k *kindSpec, ref records.Ref, rec records.Record, state []byte) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		next, err := n.replayAttempt(ctx, k, ref, rec, state)
		var pe *PanicError
		if err == nil || IsPermanent(err) || errors.As(err, &pe) || attempt >= k.retry.Attempts {
			return next, err
		}
		timer := time.NewTimer(k.retry.Delay(attempt))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// replayAttempt runs the logic once on rec and state, as an attempt on a
// node does, with nothing published.
func (n *Node) replayAttempt(ctx context.Context, k *kindSpec, ref records.Ref, rec records.Record, state []byte) (next []byte, err error) {
	if k.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, k.timeout)
		defer cancel()
	}
	c := newCallContext(ctx, &call{self: ref, rec: rec, base: discardLogger, names: n.names,
		routes: n.routes, maxMsg: n.conn.MaxPayload()})
	defer func() {
		if v := recover(); v != nil {
			next, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	next, err = k.run(c, state)
	if err = c.outcome(err); err != nil {
		return nil, err
	}
	return next, nil
}

// readAll hands fn the messages of stream on subject in order, from the
// first, until fn returns false, the stream has no more, or (upTo > 0) the
// message at sequence upTo was handed.
func (n *Node) readAll(ctx context.Context, stream, subject string, upTo uint64, fn func(jetstream.Msg) bool) error {
	cons, err := n.conn.JetStream().OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return err
	}
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending == 0 {
			return nil
		}
		batch, err := cons.Fetch(int(min(info.NumPending, 256)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		done := false
		for m := range batch.Messages() { // read to the end: the fetch ends cleanly
			if done {
				continue
			}
			meta, err := m.Metadata()
			done = !fn(m) || err == nil && upTo > 0 && meta.Sequence.Stream >= upTo
		}
		if done {
			return nil
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
	}
}

// stateJSON renders a msgpack state as JSON.
func stateJSON(b []byte) (json.RawMessage, error) {
	var v any
	if len(b) > 0 {
		if err := codec.Unmarshal(b, &v); err != nil {
			return nil, err
		}
	}
	return json.Marshal(v)
}

// compareStates compares two msgpack states as values and names the first
// difference (keys in sorted order).
func compareStates(stored, replayed []byte) (equal bool, diff string, err error) {
	var a, b any
	if len(stored) > 0 {
		if err := codec.Unmarshal(stored, &a); err != nil {
			return false, "", fmt.Errorf("stored state does not decode: %w", err)
		}
	}
	if len(replayed) > 0 {
		if err := codec.Unmarshal(replayed, &b); err != nil {
			return false, "", fmt.Errorf("replayed state does not decode: %w", err)
		}
	}
	diff = firstDifference("state", a, b)
	return diff == "", diff, nil
}

// firstDifference returns where stored value a and replayed value b first
// differ, "" when they are equal.
func firstDifference(path string, a, b any) string {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok && x == y {
			return ""
		}
		return fmt.Sprintf("%s: stored %s, replayed %s", path, show(a), show(b))
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: stored %s, replayed %s", path, show(a), show(b))
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			av, ain := x[k]
			bv, bin := y[k]
			p := path + "." + k
			switch {
			case !ain:
				return fmt.Sprintf("%s: absent from the stored state, replayed %s", p, show(bv))
			case !bin:
				return fmt.Sprintf("%s: stored %s, absent from the replayed state", p, show(av))
			}
			if d := firstDifference(p, av, bv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok {
			return fmt.Sprintf("%s: stored %s, replayed %s", path, show(a), show(b))
		}
		for i := range min(len(x), len(y)) {
			if d := firstDifference(path+"["+strconv.Itoa(i)+"]", x[i], y[i]); d != "" {
				return d
			}
		}
		if len(x) != len(y) {
			return fmt.Sprintf("%s: stored %d elements, replayed %d", path, len(x), len(y))
		}
		return ""
	case []byte:
		y, ok := b.([]byte)
		if ok && slices.Equal(x, y) {
			return ""
		}
		if ok {
			i := 0
			for i < min(len(x), len(y)) && x[i] == y[i] {
				i++
			}
			return fmt.Sprintf("%s: binary values differ from byte %d (stored %d bytes, replayed %d)", path, i, len(x), len(y))
		}
	default:
		if reflect.DeepEqual(a, b) { // strings, bools, nil, maps with other keys: never == (it panics on maps)
			return ""
		}
	}
	return fmt.Sprintf("%s: stored %s, replayed %s", path, show(a), show(b))
}

// number returns v as a float64 when it is a number of any width.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

// show renders a value of a difference, cut short.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// replayControl answers <prefix>.ctl.replay.<kind> on a node hosting kind.
func (n *Node) replayControl(ctx context.Context, kind string, data []byte) ([]byte, error) {
	var req ReplayRequest
	if err := decodeRequest(data, &req, `{"id": "c1"}`); err != nil {
		return nil, err
	}
	ref, err := checkedRef(kind, req.ID)
	if err != nil {
		return nil, err
	}
	rep, err := n.Replay(ctx, ref, ReplayFrom(req.State))
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("encode the replay of %s: %w", ref, err)
	}
	return body, nil
}

// Replay asks a node hosting ref's kind to replay ref's record log and
// compare the result with its stored state ([Node.Replay]); opts as there
// (ReplayFrom). The reply must fit a NATS message: the two states are in it.
func (c *Client) Replay(ctx context.Context, ref records.Ref, opts ...ReplayOption) (ReplayReport, error) {
	if err := ref.Validate(); err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: %w: %w", ref, ErrInvalid, err)
	}
	var o replayOpts
	for _, opt := range opts {
		opt(&o)
	}
	body, err := json.Marshal(ReplayRequest{ID: ref.ID, State: o.state})
	if err != nil {
		return ReplayReport{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	msg, err := c.conn.NATS().RequestWithContext(ctx, c.names.Control(opReplay, ref.Kind), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return ReplayReport{}, fmt.Errorf("replay %s: %w: no node is running (start ea-node)", ref, ErrNoHost)
	}
	if err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: %w", ref, err)
	}
	if se := service.ErrorOf(msg); se != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: %w", ref, &ControlError{Code: se.Code, Reason: se.Reason, Message: se.Message})
	}
	var rep ReplayReport
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return ReplayReport{}, fmt.Errorf("replay %s: bad reply: %w", ref, err)
	}
	return rep, nil
}
