package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

func TestNames(t *testing.T) {
	t.Parallel()
	ref := records.Ref{Kind: "echo", ID: "a-1_B"}
	tests := []struct {
		prefix string
		want   map[string]string
	}{
		{"", map[string]string{
			"prefix":  "ea",
			"mailbox": "ea.mbox.echo.a-1_B",
			"outbox":  "ea.out.echo.a-1_B",
			"dead":    "ea.dead.echo.a-1_B",
			"mbox":    "EA_MBOX", "out": "EA_OUT",
			"deadstr": "EA_DEAD",
			"state":   "ea_state",
			"orch":    "ea_orch",
			"place":   "ea_place",
			"key":     "echo.a-1_B",
			"service": "ea",
			"control": "ea.ctl.create.echo",
		}},
		{"ea", map[string]string{
			"prefix":  "ea",
			"mailbox": "ea.mbox.echo.a-1_B",
			"outbox":  "ea.out.echo.a-1_B",
			"dead":    "ea.dead.echo.a-1_B",
			"mbox":    "EA_MBOX", "out": "EA_OUT",
			"deadstr": "EA_DEAD",
			"state":   "ea_state",
			"orch":    "ea_orch",
			"place":   "ea_place",
			"key":     "echo.a-1_B",
			"service": "ea",
			"control": "ea.ctl.create.echo",
		}},
		{"acme", map[string]string{
			"prefix":  "acme",
			"mailbox": "acme.mbox.echo.a-1_B",
			"outbox":  "acme.out.echo.a-1_B",
			"dead":    "acme.dead.echo.a-1_B",
			"mbox":    "ACME_MBOX", "out": "ACME_OUT",
			"deadstr": "ACME_DEAD",
			"state":   "acme_state",
			"orch":    "acme_orch",
			"place":   "acme_place",
			"key":     "echo.a-1_B",
			"service": "acme",
			"control": "acme.ctl.create.echo",
		}},
		{"my-App_2", map[string]string{
			"prefix":  "my-App_2",
			"mailbox": "my-App_2.mbox.echo.a-1_B",
			"outbox":  "my-App_2.out.echo.a-1_B",
			"dead":    "my-App_2.dead.echo.a-1_B",
			"mbox":    "MY_APP_2_MBOX", "out": "MY_APP_2_OUT",
			"deadstr": "MY_APP_2_DEAD",
			"state":   "my-App_2_state",
			"orch":    "my-App_2_orch",
			"key":     "echo.a-1_B",
			"service": "my-App_2",
			"control": "my-App_2.ctl.create.echo",
		}},
	}
	for _, tt := range tests {
		t.Run("prefix="+tt.prefix, func(t *testing.T) {
			n, err := bus.NewNames(tt.prefix)
			if err != nil {
				t.Fatalf("NewNames(%q): %v", tt.prefix, err)
			}
			got := map[string]string{
				"prefix":  n.Prefix(),
				"mailbox": n.Mailbox(ref),
				"outbox":  n.Outbox(ref),
				"dead":    n.Dead(ref),
				"mbox":    n.MailboxStream(),
				"out":     n.OutboxStream(),
				"deadstr": n.DeadStream(),
				"state":   n.StateBucket(),
				"orch":    n.OrchBucket(),
				"place":   n.PlaceBucket(),
				"key":     n.StateKey(ref),
				"service": n.Service(),
				"control": n.Control("create", "echo"),
			}
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

func TestNamesRefOfRoundTrip(t *testing.T) {
	t.Parallel()
	refs := []records.Ref{
		{Kind: "echo", ID: "1"},
		{Kind: "a-b_C", ID: "X_y-z"},
		{Kind: strings.Repeat("k", records.MaxNameLen), ID: strings.Repeat("i", records.MaxNameLen)},
	}
	for _, prefix := range []string{"ea", "acme", "my-App_2"} {
		n, err := bus.NewNames(prefix)
		if err != nil {
			t.Fatal(err)
		}
		subjects := map[string]func(records.Ref) string{"mailbox": n.Mailbox, "outbox": n.Outbox, "dead": n.Dead}
		for _, r := range refs {
			for what, subject := range subjects {
				s := subject(r)
				got, ok := n.RefOf(s)
				if !ok || got != r {
					t.Errorf("prefix %q: RefOf(%s %q) = %v, %t; want %v, true", prefix, what, s, got, ok, r)
				}
			}
		}
	}
}

func TestNamesRefOfRejects(t *testing.T) {
	t.Parallel()
	n, err := bus.NewNames("ea")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", records.MaxNameLen+1)
	for _, subject := range []string{
		"",
		"ea",
		"ea.",
		"ea.mbox",
		"ea.mbox.echo",         // no id
		"ea.mbox.echo.1.extra", // one token too many
		"ea.mbox..1",           // empty kind
		"ea.mbox.echo.",        // empty id
		"ea.mbox.echo.*",       // wildcard id
		"ea.mbox.*.1",          // wildcard kind
		"ea.mbox.>",            // full wildcard
		"ea.ctl.create.echo",   // control, not a record subject
		"ea.state.echo.1",      // unknown class
		"ea.MBOX.echo.1",       // classes are lower case
		"EA.mbox.echo.1",       // prefixes are case sensitive
		"eax.mbox.echo.1",      // prefix must be a whole token
		"acme.mbox.echo.1",     // another deployment's subject
		"x.ea.mbox.echo.1",     // prefix must come first
		"ea.mbox." + long + ".1",
		"ea.mbox.echo." + long,
	} {
		if r, ok := n.RefOf(subject); ok {
			t.Errorf("RefOf(%q) = %v, true; want false", subject, r)
		}
	}
	acme, err := bus.NewNames("acme")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := acme.RefOf("ea.mbox.echo.1"); ok {
		t.Errorf("acme RefOf(ea.mbox.echo.1) = %v, true; want false", r)
	}
}

func TestNewNamesRejectsBadPrefix(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{
		"ea.x",
		"ea x",
		" ea",
		"*",
		">",
		"ea.>",
		"a/b",
		"é",
		"ea\n",
		strings.Repeat("p", records.MaxNameLen+1),
	} {
		_, err := bus.NewNames(prefix)
		if !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("NewNames(%q) = %v; want an error wrapping ErrInvalidConfig", prefix, err)
			continue
		}
		if !strings.Contains(err.Error(), "prefix") {
			t.Errorf("NewNames(%q) error %q does not name the prefix", prefix, err)
		}
	}
}

func TestPlacementKeys(t *testing.T) {
	t.Parallel()
	n, err := bus.NewNames("ea")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.LeaseKey("counter", 7); got != "part.counter.7" {
		t.Fatalf("LeaseKey = %q", got)
	}
	if kind, num, ok := n.LeaseOfKey(n.LeaseKey("task-a", 63)); !ok || kind != "task-a" || num != 63 {
		t.Fatalf("LeaseOfKey(LeaseKey) = %q %d %v", kind, num, ok)
	}
	for _, bad := range []string{"part.counter", "part..1", "part.counter.x", "part.counter.-1", "part.counter.07", "node.n1", "part.counter.1.2"} {
		if kind, num, ok := n.LeaseOfKey(bad); ok {
			t.Errorf("LeaseOfKey(%q) = %q %d, want not a lease key", bad, kind, num)
		}
	}
	if got := n.DirectGet(n.StateStream()); got != "$JS.API.DIRECT.GET.KV_ea_state" {
		t.Fatalf("DirectGet = %q", got)
	}
	if got := n.NodeAlive("n1"); got != "ea.ctl.node.n1.alive" {
		t.Fatalf("NodeAlive = %q", got)
	}
	if got := n.NodeKey("n1"); got != "node.n1" {
		t.Fatalf("NodeKey = %q", got)
	}
	if id, ok := n.NodeOfKey("node.n1"); !ok || id != "n1" {
		t.Fatalf("NodeOfKey = %q %v", id, ok)
	}
	for _, bad := range []string{"node.", "part.counter.1", "node.a.b"} {
		if _, ok := n.NodeOfKey(bad); ok {
			t.Errorf("NodeOfKey(%q) ok, want not a heartbeat key", bad)
		}
	}
}
