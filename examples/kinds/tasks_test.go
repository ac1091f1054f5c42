package kinds_test

import (
	"context"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

func TestTaskWorkers(t *testing.T) {
	const reply = "ea.mbox.supervisor.o1"
	tests := []struct {
		name      string
		kind      actor.Kind[kinds.TaskState]
		typ       string
		process   string
		reply     string
		payload   any
		state     kinds.TaskState
		wantType  string // type of the single output ("" none)
		wantOut   string // result output or error text
		wantState kinds.TaskState
		permanent bool
	}{
		{name: "a upper-cases", kind: kinds.TaskA(), typ: "task", process: "o1", reply: reply,
			payload: kinds.TaskInput{Text: "hello world", Attempt: 1}, wantType: "result", wantOut: "HELLO WORLD",
			wantState: kinds.TaskState{Done: 1}},
		{name: "b reverses words", kind: kinds.TaskB(), typ: "task", process: "o1", reply: reply,
			payload: kinds.TaskInput{Text: "one two  three", Attempt: 1}, wantType: "result", wantOut: "three two one",
			wantState: kinds.TaskState{Done: 1}},
		{name: "fails while attempt below fail_until", kind: kinds.TaskA(), typ: "task", process: "o1", reply: reply,
			payload: kinds.TaskInput{Text: "x", Attempt: 1, FailUntil: 2}, wantType: "error",
			wantOut:   "task-a/w failed attempt 1 on purpose (fail_until 2)",
			wantState: kinds.TaskState{Failed: 1}},
		{name: "succeeds at fail_until", kind: kinds.TaskA(), typ: "task", process: "o1", reply: reply,
			payload: kinds.TaskInput{Text: "x", Attempt: 2, FailUntil: 2}, wantType: "result", wantOut: "X",
			wantState: kinds.TaskState{Done: 1}},
		{name: "cancel remembers the process", kind: kinds.TaskA(), typ: "cancel", process: "o1",
			wantState: kinds.TaskState{Cancelled: []string{"o1"}}},
		{name: "cancel twice is one entry", kind: kinds.TaskA(), typ: "cancel", process: "o1",
			state: kinds.TaskState{Cancelled: []string{"o1"}}, wantState: kinds.TaskState{Cancelled: []string{"o1"}}},
		{name: "task of a cancelled process is skipped", kind: kinds.TaskB(), typ: "task", process: "o1", reply: reply,
			payload: kinds.TaskInput{Text: "x"}, state: kinds.TaskState{Cancelled: []string{"o1"}},
			wantType: "skipped", wantState: kinds.TaskState{Skipped: 1, Cancelled: []string{"o1"}}},
		{name: "cancel without process", kind: kinds.TaskA(), typ: "cancel", permanent: true},
		{name: "task without reply", kind: kinds.TaskA(), typ: "task", payload: kinds.TaskInput{Text: "x"}, permanent: true},
		{name: "unknown type", kind: kinds.TaskA(), typ: "inc", permanent: true},
		{name: "reject", kind: kinds.TaskB(), typ: "task", reply: reply, payload: kinds.TaskInput{Text: "x", Reject: true}, permanent: true},
		{name: "bad payload", kind: kinds.TaskA(), typ: "task", reply: reply, payload: "text", permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := records.New(tt.typ, tt.payload)
			if err != nil {
				t.Fatal(err)
			}
			rec.Process, rec.Reply = tt.process, tt.reply
			self := records.Ref{Kind: tt.kind.Name, ID: "w"}
			s, outs, err := tt.kind.Apply(context.Background(), self, rec, tt.state)
			if tt.permanent {
				if !actor.IsPermanent(err) {
					t.Fatalf("err = %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Done != tt.wantState.Done || s.Failed != tt.wantState.Failed || s.Skipped != tt.wantState.Skipped ||
				len(s.Cancelled) != len(tt.wantState.Cancelled) {
				t.Fatalf("state %+v, want %+v", s, tt.wantState)
			}
			if tt.wantType == "" {
				if len(outs) != 0 {
					t.Fatalf("outputs %+v, want none", outs)
				}
				return
			}
			if len(outs) != 1 || outs[0].Record.Type != tt.wantType {
				t.Fatalf("outputs %+v, want one %q", outs, tt.wantType)
			}
			out := outs[0]
			if out.Record.Process != tt.process || out.Record.Cause != rec.ID {
				t.Fatalf("output process %q cause %q, want %q %q", out.Record.Process, out.Record.Cause, tt.process, rec.ID)
			}
			switch tt.wantType {
			case "result":
				var r kinds.TaskResult
				if err := out.Record.Decode(&r); err != nil {
					t.Fatal(err)
				}
				if out.Subject != reply || r.Output != tt.wantOut || r.Worker != self.String() {
					t.Fatalf("result %+v to %s, want output %q to %s", r, out.Subject, tt.wantOut, reply)
				}
			case "error":
				var e kinds.TaskError
				if err := out.Record.Decode(&e); err != nil {
					t.Fatal(err)
				}
				if out.Subject != reply || e.Error != tt.wantOut {
					t.Fatalf("error %+v to %s, want %q to %s", e, out.Subject, tt.wantOut, reply)
				}
			case "skipped":
				if out.Subject != "ea.out."+self.Kind+".w" {
					t.Fatalf("skipped went to %s", out.Subject)
				}
			}
		})
	}
}

func TestTaskCancelledIsBounded(t *testing.T) {
	s := kinds.TaskState{}
	for i := range kinds.MaxCancelled + 5 {
		rec, err := records.New("cancel", nil)
		if err != nil {
			t.Fatal(err)
		}
		rec.Process = "p" + string(rune('a'+i%26)) + records.NewID()
		if s, _, err = kinds.TaskA().Apply(context.Background(), records.Ref{Kind: "task-a", ID: "w"}, rec, s); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.Cancelled) != kinds.MaxCancelled {
		t.Fatalf("%d cancelled kept, want %d", len(s.Cancelled), kinds.MaxCancelled)
	}
}
