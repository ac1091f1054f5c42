package actor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

type traceKey struct{}

// TestMiddlewareOrderContextAndOutputs: middleware runs first-outermost; a
// context.Context derived with WithContext reaches the logic; outputs sent
// through the derived Context and through the outer one are held for the
// same attempt and published in order; the outer Context is unchanged.
func TestMiddlewareOrderContextAndOutputs(t *testing.T) {
	t.Parallel()
	var order []string
	named := func(name string) actor.Middleware[int] {
		return func(next actor.Logic[int]) actor.Logic[int] {
			return func(c *actor.Context, s int) (int, error) {
				order = append(order, name+">")
				s, err := next(c, s)
				order = append(order, "<"+name)
				return s, err
			}
		}
	}
	withValue := func(next actor.Logic[int]) actor.Logic[int] {
		return func(c *actor.Context, s int) (int, error) {
			if err := c.Emit("before", nil); err != nil {
				return s, err
			}
			inner := c.WithContext(context.WithValue(c, traceKey{}, "t-1"))
			s, err := next(inner, s)
			if got := c.Value(traceKey{}); got != nil {
				t.Errorf("the outer Context sees %v: WithContext changed it", got)
			}
			return s, err
		}
	}
	k := actor.Kind[int]{Name: "mw", Logic: func(c *actor.Context, s int) (int, error) {
		order = append(order, "logic")
		if got := c.Value(traceKey{}); got != "t-1" {
			t.Errorf("logic sees value %v, want t-1", got)
		}
		if c.Self().ID != "m1" || c.Record().Type != "go" {
			t.Errorf("derived Context lost the attempt: self %s record %s", c.Self(), c.Record().Type)
		}
		return s + 1, c.Emit("inside", nil)
	}}.With(named("a"), nil, named("b"), withValue)
	next, outs, err := k.Apply(context.Background(), records.Ref{Kind: "mw", ID: "m1"}, records.Record{Type: "go"}, 41)
	if err != nil {
		t.Fatal(err)
	}
	if next != 42 {
		t.Fatalf("state %d, want 42", next)
	}
	if got := strings.Join(order, " "); got != "a> b> logic <b <a" {
		t.Fatalf("order %q, want %q", got, "a> b> logic <b <a")
	}
	var types []string
	for _, o := range outs {
		types = append(types, o.Record.Type)
	}
	if got := strings.Join(types, ","); got != "before,inside" {
		t.Fatalf("outputs %q, want before,inside", got)
	}
	if !strings.HasSuffix(outs[0].Record.ID, ":0") || !strings.HasSuffix(outs[1].Record.ID, ":1") {
		t.Fatalf("output ids %s, %s: want outputs 0 and 1 of one attempt", outs[0].Record.ID, outs[1].Record.ID)
	}
}

// TestWithKeepsAKindWithoutLogicRefused: With on a kind without Logic does
// not make one up.
func TestWithKeepsAKindWithoutLogicRefused(t *testing.T) {
	t.Parallel()
	k := actor.Kind[int]{Name: "none"}.With(func(next actor.Logic[int]) actor.Logic[int] { return next })
	if _, _, err := k.Apply(context.Background(), records.Ref{Kind: "none", ID: "x"}, records.Record{}, 0); err == nil {
		t.Fatal("Apply ran a kind without Logic")
	}
}
