package bus

import (
	"errors"
	"testing"
)

func TestCheckServerVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		old     bool
	}{
		{"2.9.10", true},
		{"2.10.29", true},
		{"2.12.15", true},
		{"2.13.99", true},
		{"1.99.0", true},
		{"2.14.0-beta.1", false},
		{"2.14.0", false},
		{"2.15.2", false},
		{"3.0.0", false},
		{"v2.15.2", false},
		{"", false},
		{"garbage", false},
	} {
		err := checkServerVersion(tc.version)
		if old := errors.Is(err, ErrServerVersion); old != tc.old {
			t.Errorf("checkServerVersion(%q) = %v, want old=%v", tc.version, err, tc.old)
		}
	}
}
