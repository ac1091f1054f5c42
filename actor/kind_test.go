package actor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
)

// TestKindDefinitionErrors: a badly defined kind is refused by Host with an
// error naming what is wrong.
func TestKindDefinitionErrors(t *testing.T) {
	t.Parallel()
	_, conn := server(t)
	logic := func(_ *actor.Context, s lagState) (lagState, error) { return s, nil }
	for _, tt := range []struct {
		kind actor.Kind[lagState]
		want string
	}{
		{actor.Kind[lagState]{Name: "a.b", Logic: logic}, "a.b"},
		{actor.Kind[lagState]{Name: "k"}, "Logic is required"},
		{actor.Kind[lagState]{Name: "k", Logic: logic, Window: -1}, "Window"},
		{actor.Kind[lagState]{Name: "k", Logic: logic, MaxBatch: -1}, "MaxBatch"},
		{actor.Kind[lagState]{Name: "k", Logic: logic, AckWait: time.Millisecond}, "AckWait"},
		{actor.Kind[lagState]{Name: "k", Logic: logic, Window: 10, Overflow: 20}, "Overflow 20 must not exceed Window 10"},
		{actor.Kind[lagState]{Name: "k", Logic: logic, Types: []string{"inc", "in c"}}, `Types: malformed record: EA-Type "in c"`},
		{actor.Kind[lagState]{Name: "k", Logic: logic, Types: make([]string, actor.MaxTypes+1)}, "Types exceed"},
	} {
		n, err := actor.NewNode(conn, actor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = n.Host(tt.kind)
		if !errors.Is(err, actor.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Host(%+v) = %v; want ErrInvalid naming %q", tt.kind, err, tt.want)
		}
	}
}
