package supervisor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/internal/tracectx"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/tracing"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

type eventKind int

const (
	evStart eventKind = iota
	evResult
	evInput
	evCancel
)

func (k eventKind) String() string {
	return [...]string{"start", "result", "input", "cancel"}[k]
}

// event is what advances an orchestration.
type event struct {
	kind  eventKind
	def   Definition      // start
	input json.RawMessage // start, input
	owner string          // start
	rec   records.Record  // result: a worker's result or error record
}

// staleError: the event no longer applies (a redelivered result, a result
// of a task that is no longer awaited, anything after the end). Its record
// is acknowledged without effect.
type staleError struct{ why string }

func (e *staleError) Error() string { return "stale: " + e.why }

// effect is a record to publish before the new orchestration record is
// written. Its id is derived from the orchestration and the graph task, so
// publishing it again (after a lost compare-and-set or a crash) is dropped
// by the stream's duplicate window.
type effect struct {
	subject string
	rec     records.Record
	worker  records.Ref // ensure this effector exists first (task records)
	name    string      // the orchestration's name, for the task metric
	// timer, when set, makes the effect a durable timer (a task's timeout):
	// rec is published as the schedule message timer.msg, fired into the
	// mailbox at its due time (see timeoutEffect).
	timer *nats.Msg
}

// maxConflicts bounds the compare-and-set retries of one change.
const maxConflicts = 16

// advance applies ev to orchestration id: read the record, compute the
// change (running graph steps), publish the records the change sends, then
// write the record with compare-and-set on the revision read. On a conflict
// (another supervisor wrote first) it reads again and re-applies ev, which
// may then no longer apply. The write is the commit point: a crash before it
// leaves the orchestration as it was, and the event is applied again later
// (the result record is redelivered; an API call fails and can be retried).
func (s *Supervisor) advance(ctx context.Context, id string, ev event) (_ orchRecord, err error) {
	if t := s.opts.Tracer; t != nil {
		var span trace.Span
		ctx, span = t.Start(ctx, "orchestration "+ev.kind.String(), trace.SpanKindConsumer, ev.rec, attribute.String("ea.orchestration", id))
		defer func() {
			if st := (*staleError)(nil); errors.As(err, &st) {
				span.SetAttributes(attribute.String("ea.stale", st.why)) // acknowledged without effect: no failure
				tracing.End(span, nil)
				return
			}
			tracing.End(span, err)
		}()
	}
	unlock := s.lock(id)
	defer unlock()
	began := time.Now()
	for range maxConflicts {
		var cur orchRecord
		var rev uint64
		if ev.kind != evStart {
			e, err := s.store.Get(ctx, id)
			if errors.Is(err, kv.ErrNotFound) {
				return orchRecord{}, fmt.Errorf("%w %q", ErrUnknownOrchestration, id)
			}
			if err != nil {
				return orchRecord{}, fmt.Errorf("read orchestration %s: %w", id, err)
			}
			cur, rev = e.Value, e.Revision
			if err := s.catchUp(ctx, cur); err != nil {
				return cur, err
			}
		}
		next, effects, err := s.apply(ctx, id, cur, ev)
		if err != nil {
			return cur, err
		}
		if size, limit := s.recordSize(next); size > limit {
			// The change cannot be stored: fail the orchestration with a
			// record that can, and send nothing.
			failed := cur
			if ev.kind == evStart {
				failed = orchRecord{ID: id, Name: next.Name, Created: next.Created, Input: next.Input}
				if len(failed.Input) > limit/2 {
					failed.Input = ""
				}
			}
			failed.Steps, failed.Status, failed.Tasks, failed.WaitingFor = next.Steps, StatusFailed, nil, ""
			failed.InputKey, failed.Prompt, failed.Answers = "", "", nil
			failed.Error = fmt.Sprintf("%v: the orchestration record would be %d bytes after step %s, over the limit of %d (the server's max payload): keep large data outside the state (store a reference) or raise max_payload", ErrTooLarge, size, next.Step, limit)
			next, effects = failed, nil
		}
		for _, ef := range effects {
			if err := s.publish(ctx, ef); err != nil {
				return cur, err
			}
		}
		next.Updated = time.Now().UTC()
		if ev.kind == evStart {
			_, err = s.store.Create(ctx, id, next)
		} else {
			_, err = s.store.Update(ctx, id, next, rev)
		}
		if errors.Is(err, kv.ErrConflict) || errors.Is(err, kv.ErrExists) {
			s.m.conflicts.Inc()
			continue
		}
		if err != nil {
			return cur, fmt.Errorf("write orchestration %s: %w", id, err)
		}
		s.counted(next, ev, time.Since(began))
		s.tell(ctx, next, &ev)
		return next, nil
	}
	return orchRecord{}, fmt.Errorf("%w: %s: %d compare-and-set conflicts in a row", ErrConflict, id, maxConflicts)
}

// recordSize returns the encoded size of r and the most a record may take.
func (s *Supervisor) recordSize(r orchRecord) (int, int) {
	limit := int(s.conn.NATS().MaxPayload()) - 4096 // headers and KV framing
	b, err := codec.Marshal(r)
	if err != nil {
		return 0, limit // the store reports it
	}
	return len(b), limit
}

func (s *Supervisor) counted(r orchRecord, ev event, took time.Duration) {
	evName := ev.kind.String()
	if ev.kind == evResult && ev.rec.Type == answerError {
		evName = answerError
	}
	s.m.steps.WithLabelValues(r.Name, evName).Inc()
	s.m.stepSeconds.WithLabelValues(r.Name, evName).Observe(took.Seconds())
	if ev.kind == evStart {
		s.m.started.WithLabelValues(r.Name).Inc()
	}
	if r.Status.Final() {
		s.m.finished.WithLabelValues(r.Name, string(r.Status)).Inc()
		s.log.Info("orchestration finished", "orchestration", r.ID, "name", r.Name, "status", r.Status, "error", r.Error)
	}
}

// apply computes the change ev makes to cur.
func (s *Supervisor) apply(ctx context.Context, id string, cur orchRecord, ev event) (orchRecord, []effect, error) {
	if ev.kind == evStart {
		now := time.Now().UTC()
		next := orchRecord{ID: id, Name: ev.def.Name(), Status: StatusRunning, Input: string(ev.input), Created: now, Steps: 1, Owner: ev.owner}
		out, err := ev.def.engine().start(s.nodeContext(ctx, id, ev.def.Name()), id, ev.input)
		if err != nil {
			return cur, nil, err
		}
		effects, err := s.settle(&next, out)
		return next, effects, err
	}

	def := s.definition(cur.Name)
	next := cur
	next.Steps = cur.Steps + 1
	switch ev.kind {
	case evCancel:
		if cur.Status.Final() {
			return cur, nil, fmt.Errorf("%w: %s is %s", ErrFinished, id, cur.Status)
		}
		var effects []effect
		seen := map[string]bool{}
		for _, t := range cur.Tasks {
			if seen[t.Worker] {
				continue
			}
			seen[t.Worker] = true
			to, err := records.ParseRef(t.Worker)
			if err != nil {
				continue
			}
			rec, err := records.New("cancel", nil)
			if err != nil {
				return cur, nil, err
			}
			rec.ID = cancelRecordID(s.idKey, id, next.Steps, t.Worker)
			rec.Process, rec.Owner = id, cur.Owner
			rec.Priority = records.PriorityHigh
			rec.From = records.Ref{Kind: MailboxKind, ID: id}
			effects = append(effects, effect{subject: s.names.Mailbox(to), rec: rec})
		}
		next.Status, next.Tasks, next.WaitingFor = StatusCancelled, nil, ""
		next.InputKey, next.Prompt, next.Answers = "", "", nil
		return next, effects, nil

	case evInput:
		switch {
		case cur.Status.Final():
			return cur, nil, fmt.Errorf("%w: %s is %s and takes no more input", ErrFinished, id, cur.Status)
		case cur.Status != StatusWaiting || cur.InputKey == "":
			return cur, nil, fmt.Errorf("%w: %s is %s (waiting for %q); input is taken only while it is WAITING", ErrNotWaiting, id, cur.Status, cur.WaitingFor)
		}
		next.Answers = append(slices.Clone(cur.Answers), answer{Key: cur.InputKey, Kind: answerInput, Payload: ev.input, ContentType: records.ContentJSON})
		next.InputKey, next.Prompt = "", ""
		return s.resumeIfReady(ctx, def, next)

	case evResult:
		if cur.Status.Final() {
			return cur, nil, &staleError{why: "orchestration is " + string(cur.Status)}
		}
		t, ok := cur.task(ev.rec.Cause)
		if !ok {
			if taskSteps(ev.rec.Cause) > cur.Steps {
				return cur, nil, errEarly
			}
			return cur, nil, &staleError{why: fmt.Sprintf("no active task %q (already answered, or sent by a change that lost a race)", ev.rec.Cause)}
		}
		next.Tasks = slices.DeleteFunc(slices.Clone(cur.Tasks), func(x activeTask) bool { return x.ID == t.ID })
		worker := t.Worker
		if !ev.rec.From.IsZero() {
			worker = ev.rec.From.String()
		}
		next.Answers = append(slices.Clone(cur.Answers), answer{
			Key: t.Key, Kind: ev.rec.Type, Worker: worker, Payload: ev.rec.Payload,
			ContentType: ev.rec.ContentType, Attempt: t.Attempt,
		})
		return s.resumeIfReady(ctx, def, next)
	}
	return cur, nil, fmt.Errorf("unknown event %d", ev.kind)
}

// resumeIfReady resumes the graph once every request it paused on has its
// answer; until then it only records the answer.
func (s *Supervisor) resumeIfReady(ctx context.Context, def Definition, next orchRecord) (orchRecord, []effect, error) {
	if len(next.Tasks) > 0 || next.InputKey != "" {
		next.WaitingFor = waitingFor(next)
		if next.InputKey == "" {
			next.Status = StatusRunning
		}
		return next, nil, nil
	}
	if def == nil {
		return next, nil, fmt.Errorf("orchestration %s is a %q, which this supervisor does not run (it runs %s)", next.ID, next.Name, strings.Join(s.Names(), ", "))
	}
	out, err := def.engine().resume(s.nodeContext(ctx, next.ID, next.Name), next.ID, next.Checkpoint, next.Answers)
	if err != nil {
		return next, nil, err
	}
	var ie *InputError
	if errors.As(out.failed, &ie) {
		// Refuse the input; the orchestration keeps waiting for a better one.
		return next, nil, fmt.Errorf("input to %s: %w", next.ID, ie)
	}
	next.Answers = nil
	effects, err := s.settle(&next, out)
	return next, effects, err
}

// settle writes a run's outcome into r and returns the task records to send.
// A definition that pauses in a way the supervisor cannot serve fails the
// orchestration (retrying would not help).
func (s *Supervisor) settle(r *orchRecord, out outcome) ([]effect, error) {
	effects, err := s.settleWaits(r, out)
	if err != nil {
		r.Status, r.Error, r.Tasks, r.InputKey, r.Prompt, r.WaitingFor = StatusFailed, err.Error(), nil, "", "", ""
		return nil, nil
	}
	return effects, nil
}

func (s *Supervisor) settleWaits(r *orchRecord, out outcome) ([]effect, error) {
	r.Checkpoint, r.Step = out.checkpoint, out.step
	if out.results != nil {
		r.Results = string(out.results)
	}
	r.Tasks, r.InputKey, r.Prompt, r.WaitingFor = nil, "", "", ""
	switch {
	case out.failed != nil:
		r.Status, r.Error = StatusFailed, out.failed.Error()
		return nil, nil
	case out.done:
		r.Status = StatusCompleted
		return nil, nil
	}
	var effects []effect
	now := time.Now().UTC()
	for _, w := range out.waits {
		switch w.req.Kind {
		case requestInput:
			if r.InputKey != "" {
				return nil, fmt.Errorf("%w: two steps wait for input at once (the second is %s): one input step at a time", ErrInvalid, w.step)
			}
			r.InputKey, r.Prompt = w.key, w.req.Prompt
		case requestTask:
			to, err := records.ParseRef(w.req.To)
			if err != nil {
				return nil, fmt.Errorf("%w: step %s: task worker: %v", ErrInvalid, w.step, err)
			}
			ct := records.ContentMsgpack
			if w.req.JSON {
				ct = records.ContentJSON
			}
			rec := records.Record{
				ID:   taskRecordID(s.idKey, r, w),
				Type: w.req.Type, From: records.Ref{Kind: MailboxKind, ID: r.ID},
				Process: r.ID, Owner: r.Owner, Reply: s.Mailbox(r.ID), Time: now,
				ContentType: ct, Payload: w.req.Payload,
			}
			if err := rec.Validate(); err != nil {
				return nil, fmt.Errorf("%w: step %s: task record: %v", ErrInvalid, w.step, err)
			}
			effects = append(effects, effect{subject: s.names.Mailbox(to), rec: rec, worker: to, name: r.Name})
			if w.req.TimeoutMS > 0 {
				after := time.Duration(w.req.TimeoutMS) * time.Millisecond
				body, err := json.Marshal(timer{Due: now.Add(after), After: after.String(), Worker: to.String()})
				if err != nil {
					return nil, err
				}
				effects = append(effects, s.timeoutEffect(r.ID, now.Add(after), records.Record{
					ID: rec.ID + ".timer", Type: "timeout", From: rec.From, Process: r.ID, Cause: rec.ID,
					Time: now, ContentType: records.ContentJSON, Payload: body,
				}))
			}
			r.Tasks = append(r.Tasks, activeTask{
				Task: Task{ID: rec.ID, Step: w.step, Worker: to.String(), Type: rec.Type, Sent: now},
				Key:  w.key, Attempt: w.req.Attempt,
			})
		default:
			return nil, fmt.Errorf("%w: step %s paused with %q: pause through supervisor.Call or supervisor.AwaitInput", ErrInvalid, w.step, w.req.Kind)
		}
	}
	if len(effects) == 0 && r.InputKey == "" {
		return nil, fmt.Errorf("%w: the graph paused in %s with nothing to wait for", ErrInvalid, r.Step)
	}
	r.Status = StatusRunning
	if r.InputKey != "" {
		r.Status = StatusWaiting
	}
	r.WaitingFor = waitingFor(*r)
	return effects, nil
}

func waitingFor(r orchRecord) string {
	var parts []string
	if r.InputKey != "" {
		parts = append(parts, "input")
	}
	for _, t := range r.Tasks {
		if !slices.Contains(parts, t.Worker) {
			parts = append(parts, t.Worker)
		}
	}
	return strings.Join(parts, ",")
}

// timeoutEffect is the effect that sets the timeout of a task as a durable
// timer (the mechanism of actor's timers, docs/timers.md): a schedule
// message in the timer stream, named after the timeout record's id, that
// the server fires at due and a node forwards to the mailbox
// <prefix>.mbox.supervisor-timer.<orchestration id>, where handleTimer
// takes it. Applying the change again publishes the same message with the
// same id, which the duplicate window drops.
func (s *Supervisor) timeoutEffect(orch string, due time.Time, rec records.Record) effect {
	sum := sha256.Sum256([]byte(rec.ID))
	name := "to" + hex.EncodeToString(sum[:10])
	target := records.Ref{Kind: TimerKind, ID: orch}
	msg := s.names.TimerMsg(target, name, "@at "+due.UTC().Format(time.RFC3339Nano), "", rec)
	return effect{subject: msg.Subject, rec: rec, timer: msg}
}

// timer is the payload of a task's timeout record.
type timer struct {
	Due    time.Time `json:"due"`
	After  string    `json:"after"`
	Worker string    `json:"worker"`
}

// taskRecordID is the id of the task record w sends:
// <orchestration id>.<steps>.<hash>, where steps is the Steps count of the
// record the change writes and hash covers the graph task and what is sent.
//
// Applying the same change again (after a crash or a lost compare-and-set)
// sends the same task with the same id, which the stream's duplicate window
// drops. Two supervisors that took different decisions from the same record
// (two inputs at once) send different ids, so the winner's record never
// names a task whose content the loser wrote; the loser's task answers no
// active task and its result is dropped. A result whose steps are above the
// record's arrived before the change that sent its task was written (the
// worker was faster than the compare-and-set): it is retried shortly.
//
// With key (the runtime's output id key, bus.Conn.OutputKey) the hash is an
// HMAC, so a client that knows the orchestration and its input cannot
// publish a record with the next task's id first and suppress the task.
func taskRecordID(key []byte, r *orchRecord, w wait) string {
	h := sha256.New()
	if len(key) > 0 {
		h = hmac.New(sha256.New, key)
		h.Write([]byte("ea-task-id\x00"))
	}
	for _, part := range [][]byte{[]byte(w.key), {0}, []byte(w.req.To), {0}, []byte(w.req.Type), {0}, w.req.Payload} {
		h.Write(part)
	}
	return r.ID + "." + strconv.Itoa(r.Steps) + "." + hex.EncodeToString(h.Sum(nil)[:10])
}

// cancelRecordID is the id of the cancel record a cancelled orchestration
// sends to worker: <orchestration id>.<steps>.cancel.<worker>, and with key
// (see taskRecordID) .<tag>, an HMAC of the rest, so a client cannot
// suppress the cancel by publishing its id first.
func cancelRecordID(key []byte, id string, steps int, worker string) string {
	base := id + "." + strconv.Itoa(steps) + ".cancel." + worker
	if len(key) == 0 {
		return base
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte("ea-cancel-id\x00" + base))
	return base + "." + hex.EncodeToString(h.Sum(nil)[:10])
}

// taskSteps returns the steps part of a task record id, 0 if it has none.
func taskSteps(id string) int {
	parts := strings.Split(id, ".")
	if len(parts) != 3 {
		return 0
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0
	}
	return n
}

// errEarly: a result arrived for a task whose change is not written yet.
var errEarly = errors.New("result ahead of its orchestration record")

// publish publishes one effect, creating its worker effector first if this
// supervisor has not seen it yet.
func (s *Supervisor) publish(ctx context.Context, ef effect) error {
	if !ef.worker.IsZero() {
		if err := s.ensureWorker(ctx, ef.worker); err != nil {
			return err
		}
	}
	msg := ef.timer
	if msg != nil && msg.Header != nil {
		tracectx.InjectHeader(ctx, msg.Header) // the timer fires in the step's trace
	}
	if msg == nil {
		// The one check of where records may go (bus.Routes): task records
		// go to mailboxes only.
		if _, err := s.routes.Check(records.Ref{}, ef.subject); err != nil {
			return fmt.Errorf("publish %s: %w", ef.rec.Type, err)
		}
		tracectx.Inject(ctx, &ef.rec) // the step's span, when traced
		msg = ef.rec.Msg(ef.subject)
	}
	if _, err := s.conn.JetStream().PublishMsg(ctx, msg, jetstream.WithMsgID(ef.rec.ID)); err != nil {
		return fmt.Errorf("publish %s to %s: %w", ef.rec.Type, ef.subject, err)
	}
	if ef.name != "" {
		s.m.tasks.WithLabelValues(ef.name).Inc()
	}
	return nil
}

// ensureWorker creates worker effector ref when it does not exist, so that
// the task sent to it is processed.
func (s *Supervisor) ensureWorker(ctx context.Context, ref records.Ref) error {
	s.mu.Lock()
	known := s.ensured[ref]
	s.mu.Unlock()
	if known {
		return nil
	}
	_, err := s.client.State(ctx, ref)
	if errors.Is(err, actor.ErrNotFound) {
		_, err = s.client.Create(ctx, ref, nil)
		if errors.Is(err, actor.ErrExists) {
			err = nil
		}
	}
	if errors.Is(err, actor.ErrNoHost) {
		return fmt.Errorf("%w: worker %s: no node hosts kind %q (start ea-node)", ErrUnavailable, ref, ref.Kind)
	}
	if err != nil {
		return fmt.Errorf("worker %s: %w", ref, err)
	}
	s.mu.Lock()
	s.ensured[ref] = true
	s.mu.Unlock()
	return nil
}

func (s *Supervisor) definition(name string) Definition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defs[name]
}
