package roles_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/effectors/effectors/internal/roles"
)

func TestLayoutValidate(t *testing.T) {
	for _, c := range []struct {
		layout roles.Layout
		want   string // "" valid
	}{
		{roles.Layout{}, ""},
		{roles.Layout{Prefix: "my-app", Groups: 64, Partitions: 64}, ""},
		{roles.Layout{Groups: 3, Partitions: 16}, ""}, // not a multiple: allowed
		{roles.Layout{Prefix: "a.b"}, `prefix "a.b": must be one subject token`},
		{roles.Layout{Groups: -1}, "stream groups -1: must be 1-64"},
		{roles.Layout{Groups: 65, Partitions: 128}, "stream groups 65: must be 1-64"},
		{roles.Layout{Partitions: 4097}, "partitions 4097: must be 1-4096"},
		{roles.Layout{Groups: 8, Partitions: 4}, "stream groups 8: more than the 4 partitions"},
	} {
		err := c.layout.Validate()
		_, forErr := roles.For(c.layout)
		switch {
		case c.want == "" && (err != nil || forErr != nil):
			t.Errorf("%+v: %v, %v; want valid", c.layout, err, forErr)
		case c.want != "" && (!errors.Is(err, roles.ErrInvalidLayout) || !strings.Contains(err.Error(), c.want) || !errors.Is(forErr, roles.ErrInvalidLayout)):
			t.Errorf("%+v: %v, %v; want ErrInvalidLayout saying %q", c.layout, err, forErr, c.want)
		}
	}
}

// TestForGroups: with stream groups every group's streams and buckets are
// named, mailbox and outbox subjects carry the partition token, and the
// mapping is the one the layout needs; with one group there is no mapping.
func TestForGroups(t *testing.T) {
	one, err := roles.For(roles.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	if one.MappingSource != "" || one.Layout.Groups != 1 || one.Layout.Partitions != 64 || one.Layout.Prefix != "ea" {
		t.Errorf("default layout: %+v, mapping %q", one.Layout, one.MappingSource)
	}
	r, err := roles.For(roles.Layout{Prefix: "x", Groups: 2, Partitions: 5})
	if err != nil {
		t.Fatal(err)
	}
	if r.MappingSource != "x.mbox.*.*" || r.MappingDestination != "x.mbox.{{partition(5,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}" {
		t.Errorf("mapping %q -> %q", r.MappingSource, r.MappingDestination)
	}
	has := func(user, what string, got []string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s %s lacks %s: %q", user, what, w, got)
			}
		}
	}
	perms := func(name string) roles.Permissions {
		u, ok := r.User(name)
		if !ok || u.Permissions == nil {
			t.Fatalf("no user %s with permissions", name)
		}
		return *u.Permissions
	}
	c := perms("client")
	has("client", "publish", c.PublishSubjects(), "x.mbox.*.*.*",
		"$JS.API.CONSUMER.CREATE.X_OUT_0_OF_2.*.>", "$JS.API.CONSUMER.CREATE.X_OUT_1_OF_2.*.>",
		"$JS.API.DIRECT.GET.KV_x_state_0_of_2.>", "$JS.API.DIRECT.GET.KV_x_state_1_of_2.>")
	has("client", "deny", c.DenyPublishSubjects(), "x.mbox.*.supervisor.*", "x.mbox.*.supervisor-timer.*",
		"$JS.API.CONSUMER.CREATE.X_OUT_1_OF_2.ea_store_index.>")
	n := perms("node")
	has("node", "publish", n.PublishSubjects(), "$KV.x_state_0_of_2.>", "$KV.x_state_1_of_2.>")
	has("node", "deny", n.DenyPublishSubjects(), "$JS.API.STREAM.PURGE.X_MBOX_1_OF_2", "$JS.API.STREAM.PURGE.KV_x_state_1_of_2",
		"$JS.API.STREAM.PURGE.X_MBOX", "$JS.API.STREAM.PURGE.KV_x_state")
	s := perms("supervisor")
	has("supervisor", "publish", s.PublishSubjects(), "x.mbox.*.*.*", "x.out.*.supervisor.*")
	has("supervisor", "subscribe", s.SubscribeSubjects(), "x.mbox.*._probe.*")
	if admin, _ := r.User("admin"); admin.Permissions != nil {
		t.Error("admin has permissions; want everything in the account")
	}
}
