package bus_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

func TestRoutesCheck(t *testing.T) {
	t.Parallel()
	names, err := bus.NewNames("ea")
	if err != nil {
		t.Fatal(err)
	}
	def, err := names.Routes(nil)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := names.Routes([]string{"replies.>", "audit.*.log", "EA.>"})
	if err != nil {
		t.Fatal(err)
	}
	none, err := names.Routes([]string{})
	if err != nil {
		t.Fatal(err)
	}
	self := records.Ref{Kind: "counter", ID: "c1"}
	gnames, _ := names.WithPartitions(8)
	gnames, _ = gnames.WithGroups(4)
	grouped, err := gnames.Routes(nil)
	if err != nil {
		t.Fatal(err)
	}
	own := gnames.Outbox(self) // ea.out.<p>.counter.c1
	p := gnames.Partition(self)
	wrongP := "ea.out." + fmt.Sprint((p+1)%8) + ".counter.c1"
	other := gnames.Outbox(records.Ref{Kind: "counter", ID: "c2"})
	const ok, stream = "", "stream"
	tests := []struct {
		routes  bus.Routes
		subject string
		want    string // ok, stream, or a fragment of the refusal
	}{
		{def, "ea.mbox.counter.c2", stream},
		{def, "ea.mbox.counter.c1", stream},
		{def, "ea.out.counter.c1", stream}, // own outbox
		{def, "_INBOX.abc.def", ok},
		{def, "_INBOX", "not a mailbox"},
		{def, "ea.out.counter.other", "outbox of another effector"},
		{def, "ea.out.other.c1", "outbox of another effector"},
		{def, "ea.dead.counter.x", "dead-letter"},
		{def, "ea.dead.counter.c1", "dead-letter"},
		{def, "ea.ctl.terminate.counter", "control"},
		{def, "ea.ctl.host.create.counter", "control"},
		{def, "ea.orch.start", "orchestration"},
		{def, "ea.place", "runtime subject"},
		{def, "ea", "runtime subject"},
		{def, "ea.mbox.counter", "not a mailbox subject"},
		{def, "ea.mbox.counter.c1.extra", "not a mailbox subject"},
		{def, "ea.mbox.3.counter.c1", "not a mailbox subject"},
		{def, "ea.mbox.count+er.c1", "not a valid effector subject"},
		{def, "$KV.ea_state.counter.victim", "system subject"},
		{def, "$JS.API.STREAM.PURGE.KV_ea_state", "system subject"},
		{def, "$JS.API.STREAM.PURGE.EA_RECORDS", "system subject"},
		{def, "$kv.ea_state.x", "system subject"},
		{def, "$SYS.REQ.SERVER.PING", "system subject"},
		{def, "$O.store.x", "system subject"},
		{def, "$JSC.x", "system subject"},
		{def, "$NRG.x", "system subject"},
		{def, "$SRV.PING", "system subject"},
		{def, "$", "system subject"},
		{def, "ea.mbox.*.c1", "wildcard"},
		{def, "_INBOX.>", "wildcard"},
		{def, "a..b", "empty token"},
		{def, "a b", "control character or space"},
		{def, "", "empty"},
		{def, "replies.x", "allow it with --reply-subjects"},
		{ops, "replies.x.y", ok},
		{ops, "replies", "not a mailbox"},
		{ops, "audit.a.log", ok},
		{ops, "audit.a.b.log", "not a mailbox"},
		{ops, "_INBOX.x", "not a mailbox"},                     // not in this allow-list
		{ops, "EA.ctl.terminate.counter", ok},                  // case-sensitive: not under "ea"
		{ops, "ea.ctl.terminate.counter", "control"},           // the allow-list never overrides
		{ops, "$KV.ea_state.counter.victim", "system subject"}, // nor here
		{ops, "ea.mbox.counter.c2", stream},
		{none, "_INBOX.x", "not a mailbox"},
		{none, "ea.mbox.counter.c2", stream},
		{bus.Routes{}, "ea.mbox.counter.c2", "not configured"},
		// With stream groups the own outbox carries its partition.
		{grouped, own, stream},
		{grouped, "ea.out.counter.c1", "outboxes carry their partition"},
		{grouped, wrongP, "belongs to partition"},
		{grouped, other, "outbox of another effector"},
		{grouped, "ea.out.x.counter.c1", "not an outbox subject"},
		{grouped, "ea.out.1.count+er.c1", "not a valid effector subject"},
		{grouped, "ea.mbox.counter.c2", stream},
	}
	for _, tt := range tests {
		stream, err := tt.routes.Check(self, tt.subject)
		switch tt.want {
		case ok, "stream":
			if err != nil || stream != (tt.want == "stream") {
				t.Errorf("Check(%q, allow %v) = %v, %v; want allowed, stream %v", tt.subject, tt.routes.Allowed(), stream, err, tt.want == "stream")
			}
		default:
			if err == nil {
				t.Errorf("Check(%q, allow %v) allowed it; want refused (%s)", tt.subject, tt.routes.Allowed(), tt.want)
				continue
			}
			var fe *bus.ForbiddenError
			if !errors.Is(err, bus.ErrForbidden) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) || stream {
				t.Errorf("Check(%q) = %v, %v; want a ForbiddenError containing %q", tt.subject, stream, err, tt.want)
			}
			if tt.subject != "" && !strings.Contains(err.Error(), tt.subject) {
				t.Errorf("Check(%q) = %v: the error does not name the subject", tt.subject, err)
			}
		}
	}
}

func TestRoutesSelfIsSender(t *testing.T) {
	t.Parallel()
	names, _ := bus.NewNames("acme")
	r, err := names.Routes(nil)
	if err != nil {
		t.Fatal(err)
	}
	// No sender (a client): no outbox is its own.
	if _, err := r.Check(records.Ref{}, "acme.out.counter.c1"); !errors.Is(err, bus.ErrForbidden) {
		t.Errorf("outbox without a sender: %v, want ErrForbidden", err)
	}
	// Another prefix's subjects are not ours: only the allow-list decides.
	if _, err := r.Check(records.Ref{}, "ea.mbox.counter.c1"); !errors.Is(err, bus.ErrForbidden) {
		t.Errorf("another prefix's mailbox: %v, want ErrForbidden", err)
	}
	if s, err := r.Check(records.Ref{}, "acme.mbox.counter.c1"); err != nil || !s {
		t.Errorf("mailbox: %v %v", s, err)
	}
}

func TestRoutesPatterns(t *testing.T) {
	t.Parallel()
	names, _ := bus.NewNames("ea")
	tests := []struct {
		patterns []string
		want     string // "" valid, else a fragment of the error
	}{
		{[]string{"_INBOX.>"}, ""},
		{[]string{"replies.>", "a.*.b", ">", "*.x"}, ""},
		{[]string{"$KV.>"}, `"$KV.>": matches only NATS system subjects`},
		{[]string{"$JS.API.>"}, "system subjects"},
		{[]string{"replies.>", "$SYS.>"}, `"$SYS.>"`},
		{[]string{"ea.>"}, `"ea.>": subjects under "ea."`},
		{[]string{"ea.mbox.*.*"}, "runtime's own"},
		{[]string{"ea"}, "runtime's own"},
		{[]string{"a.>.b"}, "'>' must be the last token"},
		{[]string{"a..b"}, "empty token"},
		{[]string{""}, "empty"},
		{[]string{"a b"}, "space"},
	}
	for _, tt := range tests {
		_, err := names.Routes(tt.patterns)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Routes(%q) = %v, want valid", tt.patterns, err)
		case tt.want != "" && (err == nil || !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Routes(%q) = %v, want ErrInvalidConfig containing %q", tt.patterns, err, tt.want)
		}
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{">", "a", true},
		{">", "a.b.c", true},
		{"a.>", "a", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.*", "a", false},
		{"*.b", "a.b", true},
		{"a.b", "a.b", true},
		{"a.b", "a.B", false},
		{"a.b", "a.b.c", false},
		{"a.b.c", "a.b", false},
		{"a*.b", "ax.b", false}, // "a*" is a literal token
		{"a*.b", "a*.b", true},
	}
	for _, tt := range tests {
		if got := bus.Match(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
		}
	}
}

func TestUnpublishable(t *testing.T) {
	t.Parallel()
	if bus.Unpublishable(nil) || bus.TooLarge(errors.New("nats: timeout")) || bus.Unpublishable(errors.New("nats: no responders available for request")) {
		t.Error("nil or a transient error counted as unpublishable")
	}
	forbidden := &bus.ForbiddenError{Subject: "$KV.x", Rule: "a system subject"}
	if !bus.Unpublishable(forbidden) || bus.TooLarge(forbidden) {
		t.Error("ForbiddenError: unpublishable, not too large")
	}
}
