package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
)

// maxInput bounds a payload or state read from stdin or an argument.
const maxInput = 8 << 20

// jsonArg returns the JSON value of an optional argument, or of stdin when
// the argument is "-" (or absent and stdin wanted); nil when neither is
// given. Given but empty (an empty argument, or nothing on stdin) is
// refused: it would otherwise go out as null. what names it in errors.
func (a *app) jsonArg(args []string, i int, what string, stdinIfAbsent bool) (json.RawMessage, error) {
	var text []byte
	from := "" // where an empty value came from, for the message
	switch {
	case i < len(args) && args[i] != "-":
		text, from = []byte(args[i]), "the argument is empty"
	case (i < len(args) && args[i] == "-") || (stdinIfAbsent && a.stdin != nil):
		if a.stdin == nil {
			return nil, usagef(a.fs.Name(), "%s from stdin: no stdin", what)
		}
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxInput+1))
		if err != nil {
			return nil, fmt.Errorf("read %s from stdin: %w", what, err)
		}
		if len(b) > maxInput {
			return nil, usagef(a.fs.Name(), "%s on stdin is over %d bytes", what, maxInput)
		}
		text, from = b, "stdin is empty"
	default:
		return nil, nil
	}
	if strings.TrimSpace(string(text)) == "" {
		return nil, usagef(a.fs.Name(), "no %s: %s; give one JSON value, e.g. '{\"by\":2}' (or null), as the argument or on stdin", strings.TrimPrefix(what, "the "), from)
	}
	if !json.Valid(text) {
		var v any
		err := json.Unmarshal(text, &v)
		return nil, usagef(a.fs.Name(), "%s is not valid JSON (%v): give one JSON value, e.g. '{\"by\":2}' (quote it for the shell)", what, err)
	}
	return json.RawMessage(strings.TrimSpace(string(text))), nil
}

// printJSON writes v as one line of JSON.
func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// docJSON is a state document with its state as JSON.
func docJSON(d actor.Document) json.RawMessage {
	b, err := json.Marshal(d)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// stateText renders a document's user state as JSON text.
func stateText(d actor.Document) string {
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Sprintf("<%d bytes of msgpack: %v>", len(d.State), err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// printDoc prints a state document.
func (a *app) printDoc(d actor.Document) error {
	if a.g.json {
		_, err := fmt.Fprintf(a.stdout, "%s\n", docJSON(d))
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "effector\t%s/%s\n", d.Kind, d.ID)
	fmt.Fprintf(w, "status\t%s\n", d.Status)
	fmt.Fprintf(w, "state\t%s\n", stateText(d))
	fmt.Fprintf(w, "seq\t%d\n", d.Seq)
	if !d.Updated.IsZero() {
		fmt.Fprintf(w, "updated\t%s\n", d.Updated.Local().Format(time.RFC3339Nano))
	}
	if d.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", d.Error)
	}
	return w.Flush()
}

func cmdSend() *command {
	var o struct {
		typ, process, cause, reply, priority, id string
		wait, anyType                            bool
	}
	return &command{
		name: "send", args: "<kind>/<id> [json|-]",
		short: "send a record to an effector's mailbox",
		long: `Send a record to the mailbox of <kind>/<id>. The payload is one JSON value,
given as the argument, or read from stdin when the argument is "-" or absent
and stdin is not a terminal; it is sent as application/json. No payload, an
empty argument or an empty stdin is refused (send null as 'null'). The
envelope headers are flags. ea prints the record as stored (id, stream
sequence) once JetStream has it.

--wait also waits until the effector's cursor passed the record, then says
what became of it, on what the runtime wrote: applied (prints the state),
sent to dead letters (prints the reason; exit status 6), or applied but
answered with an error record, an output caused by the record whose type
is "error" or ends in ".error" (a task whose model is down answers
task.error; prints its message; exit status 8). A NATS user who may
not read dead letters (the client role of deploy/nats) learns "dead-lettered"
only when the state document stopped at the record with an error, and
"processed" otherwise.

A kind that declares the record types it handles (ea kinds, TYPES) gets
no other: a record of another type is refused before anything is sent
(exit status 2), naming the types; --any-type sends it all the same.

When --wait runs out of time on a remote kind whose workers do not answer,
it says so: no worker of the kind answers on <prefix>.logic.<kind>.

  ea send counter/c1 '{"by":2}' --type inc
  echo '{"by":3}' | ea send counter/c1 --type inc --wait`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.typ, "type", "", "EA-Type, the record type (default message)")
			fs.StringVar(&o.process, "process", "", "EA-Process, the process / orchestration / session id")
			fs.StringVar(&o.cause, "cause", "", "EA-Cause, the id of the record that caused this one")
			fs.StringVar(&o.reply, "reply", "", "EA-Reply, where a reply should go (a mailbox subject, or an allowed subject)")
			fs.StringVar(&o.priority, "priority", "", "EA-Priority: high, or empty")
			fs.StringVar(&o.id, "id", "", "Nats-Msg-Id, the record id (default: a new one); sending again with the same id within the duplicate window stores it once")
			fs.BoolVar(&o.wait, "wait", false, "wait until the effector applied the record, then print its state")
			fs.BoolVar(&o.anyType, "any-type", false, "send even if the kind declares record types and --type is not one of them")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 2); err != nil {
				return err
			}
			ref, err := a.ref(args[0])
			if err != nil {
				return err
			}
			payload, err := a.jsonArg(args, 1, "the payload", a.stdinPiped())
			if err != nil {
				return err
			}
			if payload == nil {
				return usagef(a.fs.Name(), "no payload: give one JSON value, e.g. '{\"by\":2}' (or null), as the argument or on stdin")
			}
			rec, err := records.NewJSON(o.typ, payload)
			if err != nil {
				return usagef(a.fs.Name(), "%v", err)
			}
			rec.ID, rec.Process, rec.Cause, rec.Reply = o.id, o.process, o.cause, o.reply
			switch o.priority {
			case "", "normal":
			case "high":
				rec.Priority = records.PriorityHigh
			default:
				return usagef(a.fs.Name(), "--priority %q: want high (or leave it out)", o.priority)
			}
			if err := rec.Validate(); err != nil {
				return usagef(a.fs.Name(), "%v", err)
			}
			if rec.Reply != "" {
				// What no node would ever reply to ($-subjects, the runtime's
				// own) is refused here; the rest depends on the nodes'
				// --reply-subjects, and a node dead-letters what they refuse.
				names, err := bus.NewNames(a.g.prefix)
				if err != nil {
					return usagef(a.fs.Name(), "--prefix: %v", err)
				}
				routes, err := names.Routes([]string{">"})
				if err != nil {
					return err
				}
				if _, err := routes.Check(records.Ref{}, rec.Reply); err != nil {
					return usagef(a.fs.Name(), "--reply %q: %v (a mailbox subject such as %s, or a subject the nodes allow)", rec.Reply, err, names.Mailbox(records.Ref{Kind: "kind", ID: "id"}))
				}
			}
			c, err := a.actorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			if !o.anyType {
				if err := checkType(cctx, c, ref, rec.Type); err != nil {
					return err
				}
			}
			var dead deadCheck
			if o.wait {
				// Where ref's dead letters stand before the send: --wait
				// then tells a dead letter from an applied record.
				if dead, err = a.deadCheckFor(cctx, c, ref); err != nil {
					return err
				}
			}
			sent, err := c.Send(cctx, ref, rec)
			if errors.Is(err, actor.ErrNotFound) {
				return missing(cctx, c, "send to", ref)
			}
			if err != nil {
				return err
			}
			dead = dead.sent(sent)
			if !o.wait {
				if a.g.json {
					return a.printJSON(map[string]any{"id": sent.ID, "seq": sent.Seq, "subject": sent.Subject, "type": sent.Type})
				}
				_, err := fmt.Fprintf(a.stdout, "sent %s to %s: id %s, seq %d\n", typeOf(sent), ref, sent.ID, sent.Seq)
				return err
			}
			doc, err := c.StateAt(cctx, ref, sent.Seq)
			if errors.Is(err, context.DeadlineExceeded) {
				if cause := stallCause(cctx, c, ref); cause != "" {
					return fmt.Errorf("record %s stored (seq %d), but %s did not process it within %v: %s: %w", sent.ID, sent.Seq, ref, a.g.timeout, cause, err)
				}
				return fmt.Errorf("record %s stored (seq %d), but %s did not process it within %v (is a node hosting %s running? ea kinds): %w", sent.ID, sent.Seq, ref, a.g.timeout, ref.Kind, err)
			}
			if err != nil {
				return fmt.Errorf("record %s stored (seq %d), but waiting for %s to process it: %w", sent.ID, sent.Seq, ref, err)
			}
			return a.sentOutcome(cctx, ref, sent, doc, dead)
		},
	}
}

// sentOutcome prints what became of a record sent with --wait, once the
// state document doc says ref's cursor passed it: applied, or sent to dead
// letters (exit status 6), decided on the dead letter stream, which the
// runtime writes before it moves the cursor, or applied but answered with a
// failure record (exit status 8: a task whose run failed), decided on the
// outbox, which the runtime writes before it moves the cursor too. A user
// who may not read dead letters gets what the state document alone can
// say.
func (a *app) sentOutcome(ctx context.Context, ref records.Ref, sent records.Record, doc actor.Document, dead deadCheck) error {
	outcome := "applied"
	if dead.denied == nil {
		d, found, err := dead.find(ctx, a.conn, sent)
		if err != nil {
			return fmt.Errorf("record %s applied or dead-lettered (seq %d): %w", sent.ID, sent.Seq, err)
		}
		if found {
			return &deadLetteredError{rec: sent, ref: ref, reason: d.Reason, text: d.Error}
		}
	} else {
		// The state document is written once per record or batch: only
		// when it stopped at this very record does its status tell this
		// record's outcome.
		if doc.Seq == sent.Seq && doc.Status == actor.StatusError {
			return &deadLetteredError{rec: sent, ref: ref, text: doc.Error}
		}
		outcome = "processed"
		fmt.Fprintf(a.stderr, "ea send: %s processed record %s, but this NATS user may not read dead letters (%s), so whether it was applied or dead-lettered is not checked\n", ref, sent.ID, dead.stream)
	}
	// Applied is not succeeded: work that failed as an outcome (a task
	// whose model is down) is an output of a failure type.
	if dead.out.denied == nil {
		out, failed, err := dead.out.find(ctx, a.conn, sent, dead.again)
		if err != nil {
			return fmt.Errorf("record %s %s (seq %d), but reading what %s answered: %w", sent.ID, outcome, sent.Seq, ref, err)
		}
		if failed {
			return &failedError{rec: sent, ref: ref, out: out}
		}
	} else {
		fmt.Fprintf(a.stderr, "ea send: %s %s record %s, but this NATS user may not read its outputs (%s), so whether the work failed is not checked\n", ref, outcome, sent.ID, dead.out.stream)
	}
	if !a.g.json {
		fmt.Fprintf(a.stdout, "sent %s to %s: id %s, seq %d, %s\n", typeOf(sent), ref, sent.ID, sent.Seq, outcome)
	}
	return a.printDoc(doc)
}

// missing explains why op (send to) found no effector ref (err): when no
// node hosts its kind either, that comes first, in the words create uses
// (exit status 4); otherwise ref was never created (3).
func missing(ctx context.Context, c *actor.Client, op string, ref records.Ref) error {
	// Activate answers whether a node hosts the kind, and changes nothing
	// for an effector that does not exist.
	if _, aerr := c.Activate(ctx, ref); errors.Is(aerr, actor.ErrNoHost) {
		return &noHostError{op: op, ref: ref, err: aerr, missing: true}
	}
	return fmt.Errorf("%s %s: %w (create it with ea create %s)", op, ref, actor.ErrNotFound, ref)
}

// hostless gives err, the failure of op on ref, the words every command
// uses when no node hosts ref's kind.
func hostless(op string, ref records.Ref, err error) error {
	if errors.Is(err, actor.ErrNoHost) {
		return &noHostError{op: op, ref: ref, err: err}
	}
	return err
}

// noHostError: no running node hosts the kind (actor.ErrNoHost), said the
// same way by create, terminate and send.
type noHostError struct {
	op      string
	ref     records.Ref
	err     error // matches actor.ErrNoHost
	missing bool  // and ref was never created
}

func (e *noHostError) Error() string {
	also := ""
	if e.missing {
		also = ", and the effector was never created"
	}
	return fmt.Sprintf("%s %s: no node hosts kind %q%s (start a node that hosts it; ea kinds lists the kinds the running nodes host)", e.op, e.ref, e.ref.Kind, also)
}

func (e *noHostError) Unwrap() error { return e.err }

func typeOf(r records.Record) string {
	if r.Type == "" {
		return records.DefaultType
	}
	return r.Type
}

// stdinPiped reports whether stdin is a pipe or file rather than a terminal
// (or absent).
func (a *app) stdinPiped() bool {
	if a.stdin == nil {
		return false
	}
	f, ok := a.stdin.(*os.File)
	if !ok {
		return true // a reader given by the caller (tests)
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice == 0
}

func cmdState() *command {
	return &command{
		name: "state", args: "<kind>/<id>",
		short: "print an effector's state document",
		long: `Print the state document of <kind>/<id>: status (IDLE, PROCESSING, ERROR,
TERMINATED), the state as JSON, seq (the stream sequence of the last record
applied), when it was updated and the last error. Exit status 3 when the
effector was never created.`,
		run: onEffector(1, 1, func(cctx context.Context, a *app, c *actor.Client, ref records.Ref, args []string) error {
			doc, err := c.State(cctx, ref)
			if err != nil {
				if errors.Is(err, actor.ErrNotFound) {
					return fmt.Errorf("%w (create it with ea create %s)", err, ref)
				}
				return err
			}
			if err := a.printDoc(doc); err != nil {
				return err
			}
			// The state document says what was applied; a remote kind's
			// node says what its record in hand waits for.
			if doc.Status != actor.StatusTerminated && !a.g.json {
				if cause := stallCause(cctx, c, ref); cause != "" {
					_, err = fmt.Fprintf(a.stdout, "waiting   %s\n", cause)
				}
			}
			return err
		}),
	}
}

func cmdCreate() *command {
	return &command{
		name: "create", args: "<kind>/<id> [state-json|-]",
		short: "create an effector (through a node hosting its kind)",
		long: `Create <kind>/<id>, with the given state (JSON matching the kind's state) or
the kind's initial state. Exit status 5 when it exists, 4 when no node hosts
the kind.

  ea create counter/c1
  ea create counter/c2 '{"n":10}'`,
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 2); err != nil {
				return err
			}
			ref, err := a.ref(args[0])
			if err != nil {
				return err
			}
			state, err := a.jsonArg(args, 1, "the state", false)
			if err != nil {
				return err
			}
			c, err := a.actorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			var st any
			if state != nil {
				st = state
			}
			doc, err := c.Create(cctx, ref, st)
			if err != nil {
				return hostless("create", ref, err)
			}
			if !a.g.json {
				fmt.Fprintf(a.stdout, "created %s\n", ref)
			}
			return a.printDoc(doc)
		},
	}
}

func cmdTerminate() *command {
	return &command{
		name: "terminate", args: "<kind>/<id>",
		short: "terminate an effector",
		long: `Terminate <kind>/<id>: its status becomes TERMINATED and records sent to it
later go to dead letters (reason terminated). Exit status 3 when it does not
exist.`,
		run: onEffector(1, 1, func(cctx context.Context, a *app, c *actor.Client, ref records.Ref, args []string) error {
			doc, err := c.Terminate(cctx, ref)
			if err != nil {
				return hostless("terminate", ref, err)
			}
			if !a.g.json {
				fmt.Fprintf(a.stdout, "terminated %s\n", ref)
			}
			return a.printDoc(doc)
		}),
	}
}

func cmdLs() *command {
	var o struct {
		status string
		limit  int
		cursor string
		all    bool
	}
	return &command{
		name: "ls", args: "<kind>",
		short: "list the effectors of a kind, with their status",
		long: `List the effectors of <kind> with status, seq, last update and state, a page at a
time, in the order their state documents were last written (from the record
store, served by ea-node). The last line gives the cursor of the next page
(--cursor); --all follows it to the end. --json prints one document per line,
then {"cursor","more"}.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.status, "status", "", "only effectors with this status: IDLE, PROCESSING, ERROR or TERMINATED")
			fs.IntVar(&o.limit, "limit", 100, "page size (1-1000)")
			fs.StringVar(&o.cursor, "cursor", "", "continue after a previous page")
			fs.BoolVar(&o.all, "all", false, "follow the cursor to the end")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 1); err != nil {
				return err
			}
			kind := args[0]
			if err := records.ValidateKind(kind); err != nil {
				return usagef(a.fs.Name(), "kind %q: %v", kind, err)
			}
			if o.limit < 1 || o.limit > store.MaxLimit {
				return usagef(a.fs.Name(), "--limit %d: want 1 to %d", o.limit, store.MaxLimit)
			}
			st := actor.Status(strings.ToUpper(o.status))
			switch st {
			case "", actor.StatusIdle, actor.StatusProcessing, actor.StatusError, actor.StatusTerminated:
			default:
				return usagef(a.fs.Name(), "--status %q: want IDLE, PROCESSING, ERROR or TERMINATED", o.status)
			}
			r, err := a.storeReader(ctx)
			if err != nil {
				return err
			}
			var tw *tabwriter.Writer
			if !a.g.json {
				tw = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATUS\tSEQ\tUPDATED\tSTATE")
			}
			cursor, n := o.cursor, 0
			for {
				cctx, cancel := a.call(ctx)
				page, err := r.Effectors(cctx, store.EffectorQuery{Kind: kind, Status: st, Limit: o.limit, Cursor: cursor})
				cancel()
				if err != nil {
					return err
				}
				for _, e := range page.Effectors {
					n++
					if a.g.json {
						if err := a.printJSON(e); err != nil {
							return err
						}
						continue
					}
					state := stateText(e.Document)
					if len(state) > 60 {
						state = state[:57] + "..."
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.Status, e.Seq, ago(a.now(), e.Updated), state)
				}
				cursor = page.Cursor
				if !o.all || !page.More {
					if a.g.json {
						return a.printJSON(map[string]any{"cursor": page.Cursor, "more": page.More})
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					if page.More {
						fmt.Fprintf(a.stdout, "%s; more: ea ls %s --cursor %s\n", plural(n, "effector"), kind, page.Cursor)
					} else {
						fmt.Fprintf(a.stdout, "%s\n", plural(n, "effector"))
					}
					return nil
				}
			}
		},
	}
}

func cmdKinds() *command {
	return &command{
		name: "kinds", short: "list the kinds the running nodes host",
		long: `List the kinds the nodes announce (from their heartbeats), with the nodes
hosting each and when they were last heard from, the record types each
handles (TYPES; "any" when the kind does not say: ea send refuses other
types) and, for a remote kind (logic served by worker processes), its
WORKERS: how many announce themselves, or "0: none answers <subject>" when
NATS answers "no responders" on its logic subject ("-": logic in the node).`,
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			r, err := a.storeReader(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			kinds, err := r.Kinds(cctx)
			if err != nil {
				return err
			}
			// What the nodes say of each kind (types, workers), when they
			// can say it; the heartbeats alone otherwise.
			infos := map[string]actor.KindInfo{}
			if c, err := a.actorClient(ctx); err == nil {
				for _, k := range kinds {
					if info, ok := askKind(cctx, c, k.Kind, ""); ok {
						infos[k.Kind] = info
					}
				}
			}
			if a.g.json {
				for _, k := range kinds {
					line := kindLine{Kind: k}
					if info, ok := infos[k.Kind]; ok {
						line.Types, line.Remote = info.Types, info.Remote
					}
					if err := a.printJSON(line); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tNODES\tLAST BEAT\tTYPES\tWORKERS")
			for _, k := range kinds {
				info, ok := infos[k.Kind]
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", k.Kind, len(k.Nodes), ago(a.now(), k.Beat), typesText(info, ok), workersText(info, ok))
			}
			return tw.Flush()
		},
	}
}

// kindLine is one kind in ea kinds --json: the heartbeat's fields, with
// what a node hosting it says (actor.KindInfo) when it can say it.
type kindLine struct {
	store.Kind
	Types  []string          `json:"types,omitempty"`
	Remote *actor.RemoteInfo `json:"remote,omitempty"`
}

// plural says n things: "1 effector", "2 effectors".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// ago renders t relative to now, for tables.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.Local().Format(time.RFC3339)
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format(time.RFC3339)
}
