package main

import (
	"strings"
	"testing"
)

// TestMessages pins what a new user reads when something is wrong: the
// command named once, the effector named once (a hint to fix it aside),
// the same words for a kind no node hosts whether one creates, sends to or
// terminates, and no empty payload sent as null.
func TestMessages(t *testing.T) {
	w := startWorld(t)
	w.ea(t, "", "create", "counter/x").ok(t, "create")
	nohost := `no node hosts kind "nokind" (start a node that hosts it; ea kinds lists the kinds the running nodes host)`
	cases := []struct {
		stdin string
		args  []string
		code  int
		want  string // the first line of stderr
	}{
		{"", []string{"tail"}, exitUsage, "ea tail: needs what to print: mailbox, outbox, effector, process, type or dead"},
		{"", []string{"send"}, exitUsage, "ea send: needs <kind>/<id> [json|-]"},
		{"", []string{"state", "counter/x", "more"}, exitUsage, `ea state: unexpected argument "more" (takes <kind>/<id>)`},
		{"", []string{"kinds", "more"}, exitUsage, `ea kinds: unexpected argument "more" (takes no arguments)`},
		{"", []string{"orch", "status"}, exitUsage, "ea orch status: needs <id>"},
		{"", []string{"orch", "frob"}, exitUsage, `ea orch: unknown subcommand "frob" (subcommands: start, status, input, cancel, ls)`},
		{"", []string{"tail", "outbox"}, exitUsage, "ea tail: outbox needs exactly one argument"},
		{"", []string{"tail", "dead", "a", "b"}, exitUsage, `ea tail: unexpected argument "b" (tail dead takes at most <kind> or <kind>/<id>)`},
		{"", []string{"frob"}, exitUsage, `ea: unknown command "frob" (commands: send, state, create, terminate, replay, ls, kinds, tail, dead, orch, timer, top, roles, completion, version)`},
		{"", []string{"state", "counter/zz"}, exitNotFound, "ea: state of counter/zz: effector not found (create it with ea create counter/zz)"},
		{"", []string{"send", "counter/zz", "{}", "--type", "inc"}, exitNotFound, "ea: send to counter/zz: effector not found (create it with ea create counter/zz)"},
		{"", []string{"create", "nokind/x"}, exitUnavailable, "ea: create nokind/x: " + nohost},
		{"", []string{"terminate", "nokind/x"}, exitUnavailable, "ea: terminate nokind/x: " + nohost},
		{"", []string{"send", "nokind/x", "{}"}, exitUnavailable, `ea: send to nokind/x: no node hosts kind "nokind", and the effector was never created (start a node that hosts it; ea kinds lists the kinds the running nodes host)`},
		// An empty stdin, an empty argument, no payload: refused, not null.
		{"", []string{"send", "counter/x"}, exitUsage, `ea send: no payload: stdin is empty; give one JSON value, e.g. '{"by":2}' (or null), as the argument or on stdin`},
		{" \n", []string{"send", "counter/x", "-"}, exitUsage, `ea send: no payload: stdin is empty; give one JSON value, e.g. '{"by":2}' (or null), as the argument or on stdin`},
		{"", []string{"send", "counter/x", ""}, exitUsage, `ea send: no payload: the argument is empty; give one JSON value, e.g. '{"by":2}' (or null), as the argument or on stdin`},
		{"", []string{"create", "counter/y", "-"}, exitUsage, `ea create: no state: stdin is empty; give one JSON value, e.g. '{"by":2}' (or null), as the argument or on stdin`},
	}
	for _, c := range cases {
		r := w.ea(t, c.stdin, c.args...)
		first, _, _ := strings.Cut(r.err, "\n")
		if r.code != c.code || first != c.want {
			t.Errorf("ea %q: exit %d, stderr %q\nwant exit %d, %q", c.args, r.code, r.err, c.code, c.want)
		}
		if name := saysTwice(first); name != "" {
			t.Errorf("ea %q: %q says %s twice", c.args, first, name)
		}
	}
	// Nothing above was sent: counter/x's mailbox holds no record.
	r := w.ea(t, "", "state", "counter/x", "--json").ok(t, "state")
	if !strings.Contains(r.out, `"seq":0`) {
		t.Errorf("a refused send reached counter/x: %s", r.out)
	}
}

// saysTwice returns a name that ends one clause of line and comes again
// in the next ("ea: ea tail", "counter/zz: state of counter/zz"), a hint in
// parentheses aside; "" when there is none.
func saysTwice(line string) string {
	clauses := strings.Split(line, ": ")
	for i := 0; i+1 < len(clauses); i++ {
		fs := strings.Fields(clauses[i])
		if len(fs) == 0 {
			continue
		}
		name := fs[len(fs)-1]
		next, _, _ := strings.Cut(clauses[i+1], "(")
		for _, f := range strings.Fields(next) {
			if strings.Trim(f, `",`) == name {
				return name
			}
		}
	}
	return ""
}

// TestPlural: "1 effector", not "1 effectors"; saysTwice finds what it
// should.

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 effectors", 1: "1 effector", 2: "2 effectors"} {
		if got := plural(n, "effector"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
	for line, want := range map[string]string{
		"ea: ea tail needs what to print":                           "ea",
		"ea: counter/zz: state of counter/zz: effector not found":   "counter/zz",
		"ea: state of counter/zz: not found (ea create counter/zz)": "",
	} {
		if got := saysTwice(line); got != want {
			t.Errorf("saysTwice(%q) = %q, want %q", line, got, want)
		}
	}
}
