package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/effectors/effectors/supervisor"
)

// TestOrchFailure: an error of supervisor.Client maps to its code by the
// sentinel it matches, never by its text (a 409 is not_waiting or conflict
// by its reason), and the frame carries what the supervisor answered.
func TestOrchFailure(t *testing.T) {
	api := func(code int, reason, msg string) error {
		return fmt.Errorf("input to x: %w", &supervisor.APIError{Code: code, Reason: reason, Message: msg})
	}
	for _, tc := range []struct {
		err  error
		code string
		text string // "" : err's own text
	}{
		{api(400, "invalid", "invalid: bad input"), CodeBadRequest, "invalid: bad input"},
		{api(404, "unknown_orchestration", "unknown orchestration \"x\""), CodeNotFound, "unknown orchestration \"x\""},
		{api(404, "unknown_name", "no orchestration definition by that name"), CodeNotFound, "no orchestration definition by that name"},
		// The same code, told apart by the reason; the text says the opposite.
		{api(409, "not_waiting", "orchestration changed concurrently (really)"), CodeNotWaiting, "orchestration changed concurrently (really)"},
		{api(409, "conflict", "orchestration is not waiting for input"), CodeConflict, "orchestration is not waiting for input"},
		{api(410, "finished", "orchestration already finished"), CodeFinished, "orchestration already finished"},
		{api(503, "unavailable", "no node hosts task-a"), CodeUnavailable, "no node hosts task-a"},
		{api(500, "", "boom"), CodeInternal, "boom"},
		{fmt.Errorf("start demo: %w: nobody answers ea.orch.start: start ea-supervisor", supervisor.ErrUnavailable), CodeUnavailable, ""},
		{fmt.Errorf("status of x: %w", context.DeadlineExceeded), CodeUnavailable, ""},
		{fmt.Errorf("start demo: %w: input is not valid JSON", supervisor.ErrInvalid), CodeBadRequest, ""},
		{fmt.Errorf("status of x: decode reply of ea.orch.status: %w", &json.SyntaxError{}), CodeInternal, ""},
	} {
		code, err := orchFailure(tc.err)
		want := tc.text
		if want == "" {
			want = tc.err.Error()
		}
		if code != tc.code || err.Error() != want {
			t.Errorf("orchFailure(%v) = %s %q, want %s %q", tc.err, code, err, tc.code, want)
		}
	}
	if _, err := orchFailure(errors.New("x")); err == nil {
		t.Error("orchFailure returned no error")
	}
}
