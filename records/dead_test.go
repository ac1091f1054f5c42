package records_test

import (
	"strings"
	"testing"

	"github.com/effectors/effectors/records"
)

func TestDeadID(t *testing.T) {
	long := strings.Repeat("a", records.MaxIDLen)
	tests := []struct {
		id, want string
	}{
		{"r1", "dead:r1"},
		{"s42", "dead:s42"},
		{long[:records.MaxIDLen-5], "dead:" + long[:records.MaxIDLen-5]},
	}
	for _, tt := range tests {
		if got := records.DeadID(tt.id); got != tt.want {
			t.Errorf("DeadID(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	for _, id := range []string{long, long[:records.MaxIDLen-4], "has space", "", strings.Repeat("é", 10)} {
		got := records.DeadID(id)
		if !strings.HasPrefix(got, "dead:h") || len(got) > records.MaxIDLen || got != records.DeadID(id) {
			t.Errorf("DeadID(%.20q…) = %q: want a stable hashed id", id, got)
		}
		if err := (records.Record{ID: got}).Validate(); err != nil {
			t.Errorf("DeadID(%.20q…) = %q: %v", id, got, err)
		}
	}
}
