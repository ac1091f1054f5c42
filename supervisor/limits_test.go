package supervisor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/supervisor"
)

// Oversized requests and fields get a 400 that echoes only the start of what
// they refuse, and every request gets a reply: a 1 MB id used to be echoed
// whole, and a ~1 MiB one got no reply at all.
func TestAPILimits(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	startSupervisor(t, conn)
	nearMax := int(conn.NATS().MaxPayload()) - 64 // the largest body the server takes, about
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, op, body string
		want           []string // in the error text
	}{
		{"1 MB id", supervisor.OpStatus, `{"id":"` + long(1_000_000) + `"}`, []string{"request body is 1000009 bytes", "at most 524288"}},
		{"~1 MiB id", supervisor.OpCancel, `{"id":"` + long(nearMax-10) + `"}`, []string{"request body is", "at most 524288"}},
		{"~1 MiB name", supervisor.OpStart, `{"name":"` + long(nearMax-12) + `"}`, []string{"request body is", "at most 524288"}},
		{"long id", supervisor.OpStatus, `{"id":"` + long(400_000) + `"}`, []string{`orchestration id "` + long(64) + `"… (400000 bytes)`, "1-128"}},
		{"long id for input", supervisor.OpInput, `{"id":"` + long(129) + `","input":1}`, []string{"(129 bytes)", "1-128"}},
		{"long name", supervisor.OpStart, `{"name":"` + long(500_000) + `"}`, []string{`orchestration name "` + long(64) + `"… (500000 bytes)`}},
		{"long bad id", supervisor.OpStatus, `{"id":"` + long(100) + `.y"}`, []string{`"… (102 bytes)`}},
		{"long unknown field", supervisor.OpStatus, `{"` + long(500_000) + `":1}`, []string{"bad request body", "…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := conn.NATS().Request(supervisor.Subject("ea", tc.op), []byte(tc.body), 10*time.Second)
			if err != nil {
				t.Fatalf("no reply: %v", err)
			}
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "400" {
				t.Errorf("code %q, want 400", code)
			}
			text := msg.Header.Get("Nats-Service-Error")
			if len(text) > 1100 {
				t.Errorf("error text is %d bytes: %.200s…", len(text), text)
			}
			if strings.Contains(text, long(65)) {
				t.Errorf("error echoes more than 64 bytes of the input: %.200s…", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error %.300q does not say %q", text, w)
				}
			}
		})
	}
}
