package bus_test

import (
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@10.0.0.1:4222", "nats://alice:REDACTED@10.0.0.1:4222"},
		{"nats://t0ken@10.0.0.1:4222", "nats://REDACTED@10.0.0.1:4222"},
		{"tls://a:p%40ss@h:4222,nats://tok@h2:4222", "tls://a:REDACTED@h:4222,nats://REDACTED@h2:4222"},
		{"alice:s3cret@h:4222", "alice:REDACTED@h:4222"},
		{"nats://a:b c@d@h:4222", "nats://REDACTED@h:4222"},
		{"nats://u:%zz@h", "nats://REDACTED@h"},
	} {
		got := bus.RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"s3cret", "t0ken", "p%40ss", "tok@"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactURL(%q) = %q keeps %q", tc.in, got, secret)
			}
		}
	}
}
