package kinds_test

import (
	"context"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/records"
)

func TestCounter(t *testing.T) {
	self := records.Ref{Kind: "counter", ID: "c1"}
	by := func(n int64) *int64 { return &n }
	tests := []struct {
		name      string
		typ       string
		payload   any
		json      bool
		reply     string
		want      int64
		outs      int
		permanent bool
	}{
		{name: "inc by default 1", typ: "inc", want: 11, outs: 1},
		{name: "inc by 5", typ: "inc", payload: kinds.Inc{By: by(5)}, want: 15, outs: 1},
		{name: "inc JSON", typ: "inc", payload: map[string]any{"by": 2}, json: true, want: 12, outs: 1},
		{name: "inc with reply", typ: "inc", reply: "_INBOX.x", want: 11, outs: 2},
		{name: "unknown type", typ: "dec", permanent: true},
		{name: "payload that does not fit", typ: "inc", payload: "lots", permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec records.Record
			var err error
			if tt.json {
				rec, err = records.NewJSON(tt.typ, tt.payload)
			} else {
				rec, err = records.New(tt.typ, tt.payload)
			}
			if err != nil {
				t.Fatal(err)
			}
			rec.Reply = tt.reply
			s, outs, err := kinds.Counter().Apply(context.Background(), self, rec, kinds.CounterState{Count: 10})
			if tt.permanent {
				if !actor.IsPermanent(err) {
					t.Fatalf("err = %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Count != tt.want || len(outs) != tt.outs {
				t.Fatalf("count %d with %d outputs, want %d with %d", s.Count, len(outs), tt.want, tt.outs)
			}
			var c kinds.Count
			if err := outs[0].Record.Decode(&c); err != nil || c.Count != tt.want || outs[0].Subject != "ea.out.counter.c1" || outs[0].Record.Cause != rec.ID {
				t.Fatalf("output %+v (%+v, %v)", outs[0], c, err)
			}
			if tt.reply != "" && outs[1].Subject != tt.reply {
				t.Fatalf("reply went to %s, want %s", outs[1].Subject, tt.reply)
			}
		})
	}
}

func TestController(t *testing.T) {
	self := records.Ref{Kind: "controller", ID: "ctl"}
	tests := []struct {
		name    string
		start   kinds.Start
		wantErr bool
	}{
		{"three incs", kinds.Start{Counter: "c1", Times: 3}, false},
		{"bad counter id", kinds.Start{Counter: "c.1", Times: 3}, true},
		{"zero times", kinds.Start{Counter: "c1", Times: 0}, true},
		{"too many", kinds.Start{Counter: "c1", Times: kinds.MaxTimes + 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := records.New("start", tt.start)
			if err != nil {
				t.Fatal(err)
			}
			s, outs, err := kinds.Controller().Apply(context.Background(), self, rec, kinds.ControllerState{Sent: 1})
			if tt.wantErr {
				if !actor.IsPermanent(err) {
					t.Fatalf("err = %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Sent != 4 || len(outs) != 3 {
				t.Fatalf("sent %d with %d outputs, want 4 with 3", s.Sent, len(outs))
			}
			for i, o := range outs {
				if o.Subject != "ea.mbox.counter.c1" || o.Record.Type != "inc" || o.Record.From != self || o.Record.ID != rec.ID+":"+string(rune('0'+i)) {
					t.Fatalf("output %d = %s %+v", i, o.Subject, o.Record)
				}
			}
		})
	}
}
