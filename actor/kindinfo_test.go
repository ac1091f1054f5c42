package actor_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
)

// TestKindEndpoint: any node answers the kind endpoint for a kind a node
// hosts, with the types it declares (sorted, without repeats); a kind that
// declares none takes any type; a kind nobody hosts is ErrNoHost.
func TestKindEndpoint(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	logic := func(_ *actor.Context, s lagState) (lagState, error) { return s, nil }
	actortest.StartNode(t, conn, actor.Options{},
		actor.Kind[lagState]{Name: "typed", Logic: logic, Types: []string{"inc", "dec", "inc"}},
		actor.Kind[lagState]{Name: "open", Logic: logic})
	c, err := actor.NewClient(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Kind(t.Context(), "typed", "")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "typed" || !slices.Equal(info.Types, []string{"dec", "inc"}) || info.Remote != nil || info.Accepts("") || !info.Accepts("dec") {
		t.Fatalf("typed: %+v", info)
	}
	info, err = c.Kind(t.Context(), "open", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Types) != 0 || !info.Accepts("") || !info.Accepts("anything") {
		t.Fatalf("open: %+v", info)
	}
	if _, err := c.Kind(t.Context(), "nobody", ""); !errors.Is(err, actor.ErrNoHost) {
		t.Fatalf("a kind nobody hosts: %v, want ErrNoHost", err)
	}
	if _, err := c.Kind(t.Context(), "typed", "bad id"); !errors.Is(err, actor.ErrInvalid) {
		t.Fatalf("a bad id: %v, want ErrInvalid", err)
	}
}
