package nats_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNSCMatchesConfig: the permissions nsc.sh gives each user (JWT
// operators) are those roles.conf gives it, so the two deployments are the
// same roles. (nsc itself is not run here.)
func TestNSCMatchesConfig(t *testing.T) {
	for user, pw := range passwords {
		t.Setenv("EA_"+strings.ToUpper(user)+"_PASSWORD", pw)
	}
	opts, err := server.ProcessConfigFile("roles.conf")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("nsc.sh")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)='([^']*)'$`).FindAllStringSubmatch(string(script), -1) {
		vars[m[1]] = strings.Split(m[2], ",")
	}
	same := func(user, what string, conf []string) {
		t.Helper()
		got := vars[strings.ToUpper(user)+"_"+what]
		a, b := slices.Sorted(slices.Values(conf)), slices.Sorted(slices.Values(got))
		if !slices.Equal(a, b) {
			t.Errorf("%s %s: roles.conf %q, nsc.sh %q", user, what, a, b)
		}
	}
	seen := 0
	for _, u := range opts.Users {
		if u.Permissions == nil {
			if u.Username != "admin" {
				t.Errorf("user %s has no permissions in roles.conf", u.Username)
			}
			continue
		}
		seen++
		p := u.Permissions
		same(u.Username, "ALLOW_PUB", p.Publish.Allow)
		same(u.Username, "DENY_PUB", p.Publish.Deny)
		same(u.Username, "ALLOW_SUB", p.Subscribe.Allow)
		if len(p.Subscribe.Deny) > 0 || p.Response != nil {
			t.Errorf("user %s: roles.conf has subscribe denies or responses nsc.sh does not give", u.Username)
		}
	}
	if seen != 3 {
		t.Errorf("%d users with permissions in roles.conf, want client, node and supervisor", seen)
	}
}
