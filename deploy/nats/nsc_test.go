package nats_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/effectors/effectors/internal/roles"
	"github.com/nats-io/nats-server/v2/server"
)

// fakeNSC stands in for nsc: it logs its arguments (separated by \x1f, one
// call a line) to $NSC_LOG, finds nothing nsc describe is asked for, and
// prints a credentials file for nsc generate creds.
const fakeNSC = `#!/bin/sh
for a in "$@"; do printf '%s\037' "$a"; done >> "$NSC_LOG"
printf '\n' >> "$NSC_LOG"
case "$1" in
describe) exit 1 ;;
generate) echo "-----BEGIN NATS USER JWT-----" ;;
esac
`

// nscCalls runs script with fakeNSC as nsc and returns its calls to nsc,
// each its arguments.
func nscCalls(t *testing.T, script string) [][]string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("nsc.sh is a POSIX shell script")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nsc"), []byte(fakeNSC), 0o755); err != nil {
		t.Fatal(err)
	}
	log, creds := filepath.Join(dir, "nsc.log"), filepath.Join(dir, "creds")
	cmd := exec.Command("sh", script)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "NSC_LOG=" + log, "CREDS=" + creds, "OPERATOR=test"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh %s: %v\n%s", script, err, out)
	}
	for _, user := range []string{"client", "node", "supervisor", "admin"} {
		if st, err := os.Stat(filepath.Join(creds, user+".creds")); err != nil || st.Size() == 0 {
			t.Errorf("%s did not write %s.creds: %v", script, user, err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for line := range strings.Lines(string(b)) {
		calls = append(calls, strings.Split(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\x1f"), "\x1f"))
	}
	return calls
}

// flagOf returns the value of --name in args.
func flagOf(args []string, name string) (string, bool) {
	i := slices.Index(args, "--"+name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// checkNSC runs the nsc script and checks that it gives each user the
// permissions the server configuration gives it, and the account the
// mapping of layout (none with one stream group).
func checkNSC(t *testing.T, script, config string, layout roles.Layout) {
	t.Helper()
	for user, pw := range passwords {
		t.Setenv("EA_"+strings.ToUpper(user)+"_PASSWORD", pw)
	}
	opts, err := server.ProcessConfigFile(config)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string][]string{} // user -> flag -> subjects
	var mappings [][2]string
	for _, call := range nscCalls(t, script) {
		switch {
		case len(call) > 2 && call[0] == "edit" && call[1] == "user":
			name, _ := flagOf(call, "name")
			if got[name] == nil {
				got[name] = map[string][]string{}
			}
			for _, f := range []string{"allow-pub", "deny-pub", "allow-sub"} {
				if v, ok := flagOf(call, f); ok {
					got[name][f] = append(got[name][f], strings.Split(v, ",")...)
				}
			}
		case len(call) > 2 && call[0] == "add" && call[1] == "mapping":
			from, _ := flagOf(call, "from")
			to, _ := flagOf(call, "to")
			mappings = append(mappings, [2]string{from, to})
		}
	}
	same := func(user, what string, conf []string) {
		t.Helper()
		a, b := slices.Sorted(slices.Values(conf)), slices.Sorted(slices.Values(got[user][what]))
		if !slices.Equal(a, b) {
			t.Errorf("%s %s: %s %q, %s %q", user, what, filepath.Base(config), a, filepath.Base(script), b)
		}
	}
	seen := 0
	for _, u := range opts.Users {
		if u.Permissions == nil {
			if u.Username != "admin" {
				t.Errorf("user %s has no permissions in %s", u.Username, config)
			}
			if len(got[u.Username]) > 0 {
				t.Errorf("%s gives %s permissions: %q", script, u.Username, got[u.Username])
			}
			continue
		}
		seen++
		p := u.Permissions
		same(u.Username, "allow-pub", p.Publish.Allow)
		same(u.Username, "deny-pub", p.Publish.Deny)
		same(u.Username, "allow-sub", p.Subscribe.Allow)
		if len(p.Subscribe.Deny) > 0 || p.Response != nil {
			t.Errorf("user %s: %s has subscribe denies or responses the nsc script does not give", u.Username, config)
		}
	}
	if seen != 3 {
		t.Errorf("%d users with permissions in %s, want client, node and supervisor", seen, config)
	}
	var want [][2]string
	if n := layoutNames(t, layout); n.Groups() > 1 {
		src, dest := n.MailboxMapping()
		want = append(want, [2]string{src, dest})
	}
	if !slices.Equal(mappings, want) {
		t.Errorf("%s adds the mappings %q, want %q", script, mappings, want)
	}
}

// TestNSCMatchesConfig: the permissions nsc.sh gives each user (JWT
// operators) are those roles.conf gives it, so the two deployments are the
// same roles. The script runs with a stand-in for nsc that records what it
// is asked to do.
func TestNSCMatchesConfig(t *testing.T) {
	checkNSC(t, "nsc.sh", "roles.conf", roles.Layout{Groups: 1, Partitions: 64})
}

// TestNSCMatchesConfigStreamGroups is TestNSCMatchesConfig with stream
// groups: the script "ea roles --nsc" prints gives the users the
// permissions of the configuration "ea roles" prints, and the account the
// mailbox mapping.
func TestNSCMatchesConfigStreamGroups(t *testing.T) {
	layout := roles.Layout{Prefix: "ea", Groups: 3, Partitions: 16}
	r, err := roles.For(layout)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config, script := filepath.Join(dir, "roles.conf"), filepath.Join(dir, "nsc.sh")
	writeConfig(t, config, r)
	var b strings.Builder
	if err := r.WriteNSC(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(b.String()), 0o700); err != nil {
		t.Fatal(err)
	}
	checkNSC(t, script, config, layout)
}
