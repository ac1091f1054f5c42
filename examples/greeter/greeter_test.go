package greeter_test

import (
	"context"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/examples/greeter"
	"github.com/effectors/effectors/records"
)

func TestGreet(t *testing.T) {
	g1 := records.Ref{Kind: greeter.KindName, ID: "g1"}
	rec, err := records.New("greet", greeter.Greet{Name: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	rec.Reply = "ea.mbox.log.main"
	next, outs, err := greeter.Kind().Apply(context.Background(), g1, rec, greeter.State{Greeted: 2})
	if err != nil || next.Greeted != 3 || len(outs) != 2 {
		t.Fatalf("greet = %+v, %d outputs, %v; want 3 greeted, 2 outputs", next, len(outs), err)
	}
	for i, subject := range []string{"ea.out.greeter.g1", "ea.mbox.log.main"} {
		var g greeter.Greeting
		if err := outs[i].Record.Decode(&g); err != nil || outs[i].Subject != subject || outs[i].Record.Type != "greeting" || g.Text != "hello, ada" {
			t.Errorf("output %d = %s %s %+v (%v); want %s greeting hello, ada", i, outs[i].Subject, outs[i].Record.Type, g, err, subject)
		}
	}

	for _, tc := range []struct {
		typ     string
		payload any
	}{{"wave", greeter.Greet{Name: "x"}}, {"greet", greeter.Greet{Name: " "}}} {
		rec, _ := records.New(tc.typ, tc.payload)
		if _, _, err := greeter.Kind().Apply(context.Background(), g1, rec, greeter.State{}); !actor.IsPermanent(err) {
			t.Errorf("%s %+v: %v, want a permanent error", tc.typ, tc.payload, err)
		}
	}
}
