package retry_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/retry"
)

var errFlaky = errors.New("flaky")

// TestOneMark: an error marked permanent by one package is permanent to
// every package's check, and core's codes are seen by all of them.
func TestOneMark(t *testing.T) {
	checks := map[string]func(error) bool{
		"retry.IsPermanent": retry.IsPermanent,
		"actor.IsPermanent": actor.IsPermanent,
		"graph.IsPermanent": graph.IsPermanent,
		"core.Permanent":    core.Permanent,
	}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"actor.Permanent", actor.Permanent(errFlaky), true},
		{"graph.Permanent", graph.Permanent(errFlaky), true},
		{"retry.Permanent", retry.Permanent(errFlaky), true},
		{"wrapped actor.Permanent", fmt.Errorf("step: %w", actor.Permanent(errFlaky)), true},
		{"graph.Permanent inside a core error", core.E(core.CodeFailed, "op", graph.Permanent(errFlaky)), true},
		{"actor.UnknownType", actor.UnknownType("x"), true},
		{"core invalid", core.Errorf(core.CodeInvalid, "op", "bad"), true},
		{"wrapped core permission", fmt.Errorf("x: %w", core.ErrPermission), true},
		{"core failed", core.E(core.CodeFailed, "op", errFlaky), false},
		{"core timeout", core.ErrTimeout, false},
		{"plain", errFlaky, false},
		{"nil", nil, false},
	} {
		for name, check := range checks {
			if got := check(tc.err); got != tc.permanent {
				t.Errorf("%s(%s) = %v, want %v", name, tc.name, got, tc.permanent)
			}
		}
	}
	if actor.Permanent(nil) != nil || graph.Permanent(nil) != nil {
		t.Error("Permanent(nil) must be nil")
	}
	if err := graph.Permanent(errFlaky); !errors.Is(err, errFlaky) || err.Error() != errFlaky.Error() {
		t.Errorf("the mark must wrap the error: %v", err)
	}
}

// TestOnePolicy: the packages' policy types are one type.
func TestOnePolicy(t *testing.T) {
	var p retry.Policy = actor.RetryPolicy{Attempts: 2}
	var g graph.RetryPolicy = p
	var a actor.RetryPolicy = g
	if a.Attempts != 2 {
		t.Fatal(a)
	}
}

func TestPolicy(t *testing.T) {
	if !(retry.Policy{}).IsZero() || (retry.Policy{Jitter: 0.1}).IsZero() {
		t.Error("IsZero")
	}
	p := retry.Policy{Attempts: 2}.Or(retry.Default())
	if p.Attempts != 2 || p.Backoff != 100*time.Millisecond || p.MaxBackoff != 5*time.Second || p.Multiplier != 2 || p.Jitter != 0 {
		t.Errorf("Or: %+v", p)
	}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 7: 5 * time.Second, 1000: 5 * time.Second} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	j := retry.Policy{Backoff: time.Second, Jitter: 0.2}
	for range 100 {
		if d := j.Delay(1); d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("Delay with 20%% jitter: %v", d)
		}
	}
	for _, bad := range []retry.Policy{{Attempts: -1}, {Backoff: -1}, {MaxBackoff: -1}, {Multiplier: 0.5}, {Jitter: 1}, {Jitter: -0.1}} {
		if err := bad.Validate(); !errors.Is(err, retry.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := retry.Default().Validate(); err != nil {
		t.Error(err)
	}
	on := retry.Policy{RetryOn: func(err error) bool { return !errors.Is(err, errFlaky) }}
	other := errors.New("other")
	if on.Retryable(errFlaky) || !on.Retryable(other) || on.Retryable(actor.Permanent(other)) || on.Retryable(nil) {
		t.Error("Retryable must honour RetryOn and the permanent mark")
	}
}
