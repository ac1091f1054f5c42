package bus_test

import (
	"errors"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

func TestNamesLogic(t *testing.T) {
	for _, tc := range []struct{ prefix, kind, want string }{
		{"", "counter", "ea.logic.counter"},
		{"acme", "py-counter_2", "acme.logic.py-counter_2"},
	} {
		n, err := bus.NewNames(tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Logic(tc.kind); got != tc.want {
			t.Errorf("Logic(%q) with prefix %q = %q, want %q", tc.kind, tc.prefix, got, tc.want)
		}
		if got := n.LogicQueue(tc.kind); got != tc.want {
			t.Errorf("LogicQueue(%q) with prefix %q = %q, want %q", tc.kind, tc.prefix, got, tc.want)
		}
		// A record may never be sent to a logic subject: a record must not
		// reach the workers except through the node.
		routes, err := n.Routes([]string{">"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := routes.Check(records.Ref{Kind: "k", ID: "x"}, n.Logic(tc.kind)); !errors.Is(err, bus.ErrForbidden) {
			t.Errorf("Routes.Check(%s) = %v, want ErrForbidden", n.Logic(tc.kind), err)
		}
	}
}
