package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Timer control operations: <prefix>.ctl.<op>.<kind>, answered by any node.
const (
	opTimerSet    = "timer-set"
	opTimerCancel = "timer-cancel"
	opTimerList   = "timer-list"
)

// isTimerOp reports whether op is a timer control operation.
func isTimerOp(op string) bool {
	return op == opTimerSet || op == opTimerCancel || op == opTimerList
}

// TimerSetRequest is the JSON body of a timer-set request: the effector id,
// the timer's name, exactly one of after, at, every and cron, and the record
// it fires.
type TimerSetRequest struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// After is a Go duration ("90s", "1h30m") from now.
	After string `json:"after,omitempty"`
	// At is an RFC 3339 time.
	At string `json:"at,omitempty"`
	// Every is a Go duration: a reminder repeating on that interval.
	Every string `json:"every,omitempty"`
	// Cron is a six-field cron pattern (seconds first) or @hourly etc.
	Cron     string `json:"cron,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
	// Type is the EA-Type of the record fired (default "timer").
	Type string `json:"type,omitempty"`
	// Payload is the record's payload as JSON (sent as msgpack).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// TimerNameRequest is the JSON body of a timer-cancel request.
type TimerNameRequest struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// TimerCancelReply is the reply of a timer-cancel request.
type TimerCancelReply struct {
	// Cancelled is false when there was no such timer (or it had fired).
	Cancelled bool `json:"cancelled"`
}

// TimerListReply is the reply of a timer-list request.
type TimerListReply struct {
	Timers []Timer `json:"timers"`
}

// DefaultTimerType is the EA-Type of a timer set from outside without one.
const DefaultTimerType = "timer"

// schedule turns the request's when into a Schedule.
func (r TimerSetRequest) schedule(now time.Time) (Schedule, error) {
	var s Schedule
	if r.After != "" {
		d, err := time.ParseDuration(r.After)
		if err != nil || d < 0 || d > MaxTimerDelay {
			return s, fmt.Errorf("%w: after %q: want a duration from 0s to %s such as \"90s\" or \"1h30m\"", ErrInvalid, clipText(r.After), MaxTimerDelay)
		}
		s.At = now.Add(d)
	}
	if r.At != "" {
		t, err := time.Parse(time.RFC3339Nano, r.At)
		if err != nil {
			return s, fmt.Errorf("%w: at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", ErrInvalid, clipText(r.At))
		}
		if !s.At.IsZero() {
			return s, fmt.Errorf("%w: timer schedule: set exactly one of after, at, every and cron", ErrInvalid)
		}
		s.At = t
	}
	if r.Every != "" {
		d, err := time.ParseDuration(r.Every)
		if err != nil {
			return s, fmt.Errorf("%w: every %q: want a duration such as \"30s\" or \"1h\"", ErrInvalid, clipText(r.Every))
		}
		if d == 0 {
			return s, fmt.Errorf("%w: every %q: must be at least %s", ErrInvalid, r.Every, MinTimerInterval)
		}
		s.Every = d
	}
	s.Cron, s.TimeZone = r.Cron, r.TimeZone
	return s, nil
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// timerService is a node's part in timers: the timer stream, and the
// forwarder moving fired timers into mailboxes.
type timerService struct {
	consume jetstream.ConsumeContext
	// pending are forwards published and not yet acknowledged by the
	// mailbox stream, in order; the acker goroutine acknowledges each fired
	// timer once its forward is stored, and is done when pending closes.
	pending chan pendingForward
	acked   chan struct{}
}

// pendingForward is a fired timer m whose forward f is in flight.
type pendingForward struct {
	m jetstream.Msg
	f jetstream.PubAckFuture
}

// startTimers opens the timer stream and starts forwarding fired timers. All
// nodes share one durable consumer: each fired timer goes to one of them,
// and to another if that one dies before acknowledging it.
func (n *Node) startTimers(ctx context.Context) (*timerService, error) {
	s, err := n.conn.TimerStream(ctx)
	if err != nil {
		return nil, err
	}
	n.timerStream = s
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       n.names.TimerForwarder(),
		Description:   "forwards fired timers to their effectors' mailboxes",
		FilterSubject: n.names.TimerFires(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       handAckWait(n.opts),
		MaxAckPending: 4096,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("timer forwarder consumer on %s: %w", n.names.TimerStream(), err)
	}
	t := &timerService{pending: make(chan pendingForward, 1024), acked: make(chan struct{})}
	go t.ack(ctx, n)
	cc, err := cons.Consume(func(m jetstream.Msg) { n.forwardTimer(ctx, t, m) }, jetstream.PullMaxMessages(512))
	if err != nil {
		close(t.pending)
		<-t.acked
		return nil, fmt.Errorf("consume fired timers: %w", err)
	}
	t.consume = cc
	return t, nil
}

func (t *timerService) stop(drain bool) {
	if t == nil {
		return
	}
	if drain {
		t.consume.Drain()
	} else {
		t.consume.Stop()
	}
	<-t.consume.Closed()
	close(t.pending)
	<-t.acked
}

// ack acknowledges each fired timer once its forward is stored, or asks for
// it again a second later when the forward failed or took over 10 seconds.
// While a forward waits (a mailbox stream electing a leader), every fired
// timer in hand (the one waited on and those queued behind it) is marked in
// progress every half ack wait, so that the short ack wait (handAckWait)
// hands none of them to another node meanwhile, which would forward it
// again (harmless, the mailbox drops the copy, but it is work). What it
// holds is bounded by the consumer's acknowledgements pending.
func (t *timerService) ack(ctx context.Context, n *Node) {
	defer close(t.acked)
	progress := time.NewTicker(handAckWait(n.opts) / 2)
	defer progress.Stop()
	incoming := t.pending // nil once closed
	var queue []pendingForward
	for incoming != nil || len(queue) > 0 {
		if len(queue) == 0 {
			p, ok := <-incoming
			if !ok {
				return
			}
			queue = append(queue, p)
		}
		p := queue[0]
		timeout := time.NewTimer(10 * time.Second)
	wait:
		for {
			select {
			case q, ok := <-incoming:
				if !ok {
					incoming = nil
				} else {
					queue = append(queue, q)
				}
				continue
			case <-p.f.Ok():
				_ = p.m.Ack()
			case err := <-p.f.Err():
				n.log.Warn("forward fired timer: will retry", "subject", p.m.Subject(), "err", err)
				_ = p.m.NakWithDelay(time.Second)
			case <-timeout.C:
				_ = p.m.NakWithDelay(time.Second)
			case <-progress.C:
				for _, q := range queue {
					_ = q.m.InProgress()
				}
				continue
			case <-ctx.Done():
				// Not acknowledged: redelivered after the ack wait, to this
				// node or another, and de-duplicated by the mailbox.
			}
			break wait
		}
		timeout.Stop()
		queue[0] = pendingForward{}
		queue = queue[1:]
	}
}

// handAckWait is the ack wait of the consumers the nodes share (fired
// timers, stray records): what a node that died had in hand goes to
// another after it, as promptly as partitions move (the lease TTL), not
// after the 10 or 30 seconds they once waited. At least a second.
func handAckWait(o Options) time.Duration { return max(o.HeartbeatTTL, time.Second) }

// forwardTimer publishes the record of fired timer m to its effector's
// mailbox, with the id timer:<sequence in the timer stream>, so a forward
// repeated after a crash is dropped by the mailbox's duplicate window, then
// acknowledges m. A repeating timer that was cancelled after it fired is
// not forwarded.
func (n *Node) forwardTimer(ctx context.Context, t *timerService, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		n.log.Error("fired timer without metadata", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return
	}
	ref, name, ok := n.names.TimerOf(m.Subject())
	if !ok {
		n.log.Error("fired timer on an unexpected subject: dropped", "subject", m.Subject(), "seq", meta.Sequence.Stream)
		_ = m.Term()
		return
	}
	h := m.Headers()
	if next := h.Get("Nats-Schedule-Next"); next != "" && next != "purge" {
		last, err := n.timerStream.GetLastMsgForSubject(ctx, n.names.TimerSchedule(ref, name))
		if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && last.Header.Get("Nats-Schedule") == "") {
			_ = m.Ack()
			return // cancelled after it fired
		}
		if err != nil {
			_ = m.NakWithDelay(time.Second)
			return
		}
	}
	out := nats.NewMsg(n.names.Mailbox(ref))
	for k, v := range h {
		if len(k) >= 5 && strings.EqualFold(k[:5], "Nats-") {
			continue // the server's directives: none is carried over
		}
		out.Header[k] = v
	}
	out.Header.Set(records.HeaderID, "timer:"+strconv.FormatUint(meta.Sequence.Stream, 10))
	out.Header.Set(HeaderTimerDue, meta.Timestamp.UTC().Format(time.RFC3339Nano))
	out.Header.Set(records.HeaderTime, time.Now().UTC().Format(time.RFC3339Nano))
	out.Data = m.Data()
	f, err := n.js.PublishMsgAsync(out)
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		select {
		case <-n.js.PublishAsyncComplete():
		case <-ctx.Done():
		}
		f, err = n.js.PublishMsgAsync(out)
	}
	if err != nil {
		n.log.Warn("forward fired timer: will retry", "effector", ref, "timer", name, "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	select {
	case t.pending <- pendingForward{m: m, f: f}:
	case <-ctx.Done():
	}
}

// dropTimers removes every timer of ref (it was terminated): none fires
// from then on.
func (n *Node) dropTimers(ctx context.Context, ref records.Ref) error {
	if n.timerStream == nil {
		return nil
	}
	if err := n.timerStream.Purge(ctx, jetstream.WithPurgeSubject(n.names.TimerSchedules(ref))); err != nil {
		return fmt.Errorf("terminate %s: remove its timers: %w", ref, err)
	}
	return nil
}

// serveTimer answers the timer control operations, on any node.
func (n *Node) serveTimer(op, kind string, data []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(n.runCtx, 30*time.Second)
	defer cancel()
	if n.timerStream == nil {
		return nil, fmt.Errorf("timers: the node is not ready")
	}
	switch op {
	case opTimerSet:
		var req TimerSetRequest
		if err := decodeRequest(data, &req, `{"id": "c1", "name": "wake", "after": "90s", "type": "wake", "payload": {...}}`); err != nil {
			return nil, err
		}
		ref, err := checkedRef(kind, req.ID)
		if err != nil {
			return nil, err
		}
		t, err := setTimer(ctx, n.js, n.timerStream, n.names, ref, req, time.Now().UTC())
		if err != nil {
			return nil, err
		}
		return json.Marshal(t)
	case opTimerCancel:
		var req TimerNameRequest
		if err := decodeRequest(data, &req, `{"id": "c1", "name": "wake"}`); err != nil {
			return nil, err
		}
		ref, err := checkedRef(kind, req.ID)
		if err != nil {
			return nil, err
		}
		if err := bus.ValidateTimerName(req.Name); err != nil {
			return nil, failf(ErrInvalid, "%v", err)
		}
		last, err := n.timerStream.GetLastMsgForSubject(ctx, n.names.TimerSchedule(ref, req.Name))
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("cancel timer %s of %s: %w", req.Name, ref, err)
		}
		existed := err == nil && last.Header.Get("Nats-Schedule") != ""
		if existed {
			if _, err := n.js.PublishMsg(ctx, cancelMsg(n.names, ref, req.Name, "")); err != nil {
				return nil, fmt.Errorf("cancel timer %s of %s: %w", req.Name, ref, err)
			}
		}
		return json.Marshal(TimerCancelReply{Cancelled: existed})
	case opTimerList:
		var req IDRequest
		if err := decodeRequest(data, &req, wantID); err != nil {
			return nil, err
		}
		ref, err := checkedRef(kind, req.ID)
		if err != nil {
			return nil, err
		}
		ts, err := listTimers(ctx, n.timerStream, n.names, ref)
		if err != nil {
			return nil, err
		}
		return json.Marshal(TimerListReply{Timers: ts})
	}
	return nil, failf(ErrInvalid, "unknown timer operation %q", op)
}

// setTimer publishes the schedule of a timer set from outside, checked.
func setTimer(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, names bus.Names, ref records.Ref, req TimerSetRequest, now time.Time) (Timer, error) {
	if err := bus.ValidateTimerName(req.Name); err != nil {
		return Timer{}, failf(ErrInvalid, "%v", err)
	}
	sched, err := req.schedule(now)
	if err != nil {
		return Timer{}, failf(ErrInvalid, "%v", err)
	}
	pattern, err := sched.pattern(now)
	if err != nil {
		return Timer{}, failf(ErrInvalid, "%v", err)
	}
	typ := req.Type
	if typ == "" {
		typ = DefaultTimerType
	}
	rec := records.Record{Type: typ, Time: now, ContentType: records.ContentMsgpack}
	if len(req.Payload) > 0 {
		if len(req.Payload) > MaxTimerPayload {
			return Timer{}, failf(ErrInvalid, "timer payload of %d bytes exceeds %d", len(req.Payload), MaxTimerPayload)
		}
		b, err := codec.FromJSON(req.Payload)
		if err != nil {
			return Timer{}, failf(ErrInvalid, "timer payload: not JSON: %v", err)
		}
		rec.Payload = b
	}
	if err := rec.Validate(); err != nil {
		return Timer{}, failf(ErrInvalid, "timer record: %v", err)
	}
	have, err := timerNamesIn(ctx, s, names, ref)
	if err != nil {
		return Timer{}, err
	}
	if _, ok := have[req.Name]; !ok && len(have) >= MaxTimersPerEffector {
		return Timer{}, failf(ErrInvalid, "%v: %s holds %d timers, the most one effector may hold: cancel some first", ErrTooManyTimers, ref, len(have))
	}
	ack, err := js.PublishMsg(ctx, scheduleMsg(names, ref, req.Name, pattern, sched.TimeZone, rec))
	if err != nil {
		return Timer{}, fmt.Errorf("set timer %s of %s: %w", req.Name, ref, err)
	}
	return Timer{Kind: ref.Kind, ID: ref.ID, Name: req.Name, Schedule: pattern, TimeZone: sched.TimeZone, Type: typ, Payload: req.Payload, Set: now, Seq: ack.Sequence}, nil
}

// SetTimer sets (or replaces) timer req.Name of ref from outside, through
// the control endpoint <prefix>.ctl.timer-set.<kind> of any node.
func (c *Client) SetTimer(ctx context.Context, ref records.Ref, req TimerSetRequest) (Timer, error) {
	req.ID = ref.ID
	var t Timer
	err := c.timerRequest(ctx, opTimerSet, ref, req, &t)
	return t, err
}

// CancelTimer cancels timer name of ref; it reports whether there was one.
func (c *Client) CancelTimer(ctx context.Context, ref records.Ref, name string) (bool, error) {
	var r TimerCancelReply
	err := c.timerRequest(ctx, opTimerCancel, ref, TimerNameRequest{ID: ref.ID, Name: name}, &r)
	return r.Cancelled, err
}

// Timers lists the timers ref holds, by name.
func (c *Client) Timers(ctx context.Context, ref records.Ref) ([]Timer, error) {
	var r TimerListReply
	err := c.timerRequest(ctx, opTimerList, ref, IDRequest{ID: ref.ID}, &r)
	return r.Timers, err
}

func (c *Client) timerRequest(ctx context.Context, op string, ref records.Ref, req, reply any) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("%s %s: %w: %w", op, ref, ErrInvalid, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	msg, err := c.conn.NATS().RequestWithContext(ctx, c.names.Control(op, ref.Kind), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%s %s: %w: no node is running (start ea-node)", op, ref, ErrNoHost)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, ref, err)
	}
	if se := service.ErrorOf(msg); se != nil {
		return fmt.Errorf("%s %s: %w", op, ref, &ControlError{Code: se.Code, Reason: se.Reason, Message: se.Message})
	}
	if err := json.Unmarshal(msg.Data, reply); err != nil {
		return fmt.Errorf("%s %s: bad reply: %w", op, ref, err)
	}
	return nil
}
