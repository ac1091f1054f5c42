package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// eaRoles runs ea with args and the environment vars (nothing else).
func eaRoles(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }})
	return result{out: out.String(), err: errb.String(), code: code}
}

// loadRoles parses a configuration ea roles printed as nats-server does.
func loadRoles(t *testing.T, conf string) *server.Options {
	t.Helper()
	for _, user := range []string{"CLIENT", "NODE", "SUPERVISOR", "ADMIN"} {
		t.Setenv("EA_"+user+"_PASSWORD", strings.ToLower(user)+"-pw")
	}
	path := filepath.Join(t.TempDir(), "roles.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration ea roles printed: %v\n%s", err, conf)
	}
	return opts
}

// publishAllow returns the subjects user may publish to in opts.
func publishAllow(t *testing.T, opts *server.Options, user string) []string {
	t.Helper()
	for _, u := range opts.Users {
		if u.Username == user && u.Permissions != nil {
			return u.Permissions.Publish.Allow
		}
	}
	t.Fatalf("no user %s with permissions", user)
	return nil
}

// TestRoles: ea roles prints the shipped files for the default layout, a
// configuration nats-server loads for any other (with the account mapping
// and every group's streams and buckets with stream groups), takes the
// counts from the environment as ea-node does, and refuses bad layouts
// with a usage error that says what is wrong. It connects to nothing.
func TestRoles(t *testing.T) {
	nowhere := map[string]string{"EA_NATS": "nats://127.0.0.1:1"}
	for args, file := range map[string]string{"roles": "roles.conf", "roles --nsc": "nsc.sh"} {
		r := eaRoles(t, nowhere, strings.Fields(args)...).ok(t, "ea "+args)
		shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", file))
		if err != nil {
			t.Fatal(err)
		}
		if r.out != string(shipped) {
			t.Errorf("ea %s does not print deploy/nats/%s", args, file)
		}
	}
	// The partition count does not matter with one stream group.
	if r := eaRoles(t, nil, "roles", "--partitions", "16").ok(t, "ea roles --partitions 16"); r.out != eaRoles(t, nil, "roles").out {
		t.Error("ea roles --partitions 16 differs from ea roles with one stream group")
	}

	grouped := eaRoles(t, nil, "roles", "--stream-groups", "3", "--partitions", "16").ok(t, "ea roles --stream-groups 3").out
	opts := loadRoles(t, grouped)
	client := publishAllow(t, opts, "client")
	for _, want := range []string{
		"ea.mbox.*.*.*",
		"$JS.API.STREAM.INFO.EA_OUT_0_OF_3", "$JS.API.STREAM.INFO.EA_OUT_2_OF_3",
		"$JS.API.DIRECT.GET.KV_ea_state_1_of_3.>", "$JS.API.CONSUMER.CREATE.KV_ea_state_2_of_3.*.>",
	} {
		if !slices.Contains(client, want) {
			t.Errorf("the client may not publish to %s with 3 stream groups: %q", want, client)
		}
	}
	for _, one := range []string{"ea.mbox.*.*", "$JS.API.STREAM.INFO.EA_OUT", "$JS.API.DIRECT.GET.KV_ea_state.>"} {
		if slices.Contains(client, one) {
			t.Errorf("the client of 3 stream groups has the one-stream layout's %s", one)
		}
	}
	if want := `"ea.mbox.*.*": "ea.mbox.{{partition(16,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"`; !strings.Contains(grouped, want) {
		t.Errorf("ea roles --stream-groups 3 --partitions 16 has no mapping %s", want)
	}
	if !strings.Contains(eaRoles(t, nil, "roles", "--nsc", "--groups", "3", "--partitions", "16").out,
		`nsc add mapping --account "$ACCOUNT" --from 'ea.mbox.*.*' --to 'ea.mbox.{{partition(16,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}'`) {
		t.Error("ea roles --nsc --groups 3 adds no mapping to the account")
	}

	// --groups is --stream-groups; the counts come from EA_STREAM_GROUPS
	// and EA_PARTITIONS, as ea-node's; flags win.
	if r := eaRoles(t, nil, "roles", "--groups", "3", "--partitions", "16"); r.out != grouped {
		t.Error("ea roles --groups 3 differs from --stream-groups 3")
	}
	fromEnv := map[string]string{"EA_STREAM_GROUPS": "3", "EA_PARTITIONS": "16"}
	if r := eaRoles(t, fromEnv, "roles"); r.out != grouped {
		t.Errorf("ea roles with EA_STREAM_GROUPS=3 EA_PARTITIONS=16 differs from the flags: %s", r.err)
	}
	if r := eaRoles(t, map[string]string{"EA_STREAM_GROUPS": "5"}, "roles", "--stream-groups", "3", "--partitions", "16"); r.out != grouped {
		t.Error("--stream-groups does not win over EA_STREAM_GROUPS")
	}

	// Another prefix: every subject, stream and bucket.
	acme := eaRoles(t, map[string]string{"EA_PREFIX": "acme"}, "roles", "--stream-groups", "2").ok(t, "ea roles --prefix acme").out
	allow := publishAllow(t, loadRoles(t, acme), "client")
	for _, want := range []string{"acme.mbox.*.*.*", "$JS.API.STREAM.INFO.ACME_OUT_1_OF_2", "$JS.API.STREAM.INFO.KV_acme_state_1_of_2"} {
		if !slices.Contains(allow, want) {
			t.Errorf("prefix acme: the client may not publish to %s: %q", want, allow)
		}
	}
	if strings.Contains(acme, `"ea.`) || strings.Contains(acme, "EA_OUT") || strings.Contains(acme, "ea_state") {
		t.Error("ea roles --prefix acme names subjects, streams or buckets of prefix ea")
	}

	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"roles", "--stream-groups", "0"}, `invalid value "0" for flag -stream-groups: want a whole number, at least 1`},
		{nil, []string{"roles", "--partitions", "x"}, `invalid value "x" for flag -partitions: want a whole number, at least 1`},
		{nil, []string{"roles", "--stream-groups", "65"}, "stream groups 65: must be 1-64"},
		{nil, []string{"roles", "--partitions", "5000"}, "partitions 5000: must be 1-4096"},
		{nil, []string{"roles", "--stream-groups", "8", "--partitions", "4"}, "stream groups 8: more than the 4 partitions"},
		{map[string]string{"EA_STREAM_GROUPS": "three"}, []string{"roles"}, `EA_STREAM_GROUPS "three": want a whole number, at least 1`},
		{map[string]string{"EA_PARTITIONS": "-1"}, []string{"roles"}, `EA_PARTITIONS "-1": want a whole number, at least 1`},
		{nil, []string{"roles", "extra"}, `unexpected argument "extra"`},
		{nil, []string{"roles", "--prefix", "a.b"}, `--prefix "a.b"`},
	} {
		eaRoles(t, c.env, c.args...).fails(t, "ea "+strings.Join(c.args, " "), exitUsage, c.want)
	}
}
