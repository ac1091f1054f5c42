package supervisor_test

import (
	"context"
	"errors"
	"github.com/effectors/effectors/examples/demo"
	"testing"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/supervisor"
)

func TestAPIErrorIs(t *testing.T) {
	t.Parallel()
	all := []error{supervisor.ErrInvalid, supervisor.ErrUnknownOrchestration, supervisor.ErrUnknownName,
		supervisor.ErrNotWaiting, supervisor.ErrConflict, supervisor.ErrFinished, supervisor.ErrUnavailable}
	for _, tc := range []struct {
		err  *supervisor.APIError
		want error
	}{
		{&supervisor.APIError{Code: 400, Reason: "invalid", Message: "bad"}, supervisor.ErrInvalid},
		{&supervisor.APIError{Code: 404, Reason: "unknown_orchestration", Message: "x"}, supervisor.ErrUnknownOrchestration},
		{&supervisor.APIError{Code: 404, Reason: "unknown_name", Message: `unknown orchestration "x"`}, supervisor.ErrUnknownName}, // the text is not read
		{&supervisor.APIError{Code: 409, Reason: "not_waiting", Message: "..."}, supervisor.ErrNotWaiting},
		{&supervisor.APIError{Code: 409, Reason: "conflict", Message: "orchestration is not waiting for input"}, supervisor.ErrConflict},
		{&supervisor.APIError{Code: 410, Reason: "finished", Message: "..."}, supervisor.ErrFinished},
		{&supervisor.APIError{Code: 503, Reason: "unavailable", Message: "..."}, supervisor.ErrUnavailable},
		{&supervisor.APIError{Code: 404, Message: "no reason: the first sentinel of the code"}, supervisor.ErrUnknownName},
		{&supervisor.APIError{Code: 409, Reason: "exists", Message: "a reason of no entry"}, nil},
		{&supervisor.APIError{Code: 404, Reason: "invalid", Message: "a reason of another code"}, nil},
		{&supervisor.APIError{Code: 500, Reason: "internal", Message: "boom"}, nil},
	} {
		for _, s := range all {
			if got := errors.Is(tc.err, s); got != (s == tc.want) {
				t.Errorf("errors.Is(%v, %v) = %v", tc.err, s, got)
			}
		}
	}
}

func TestNotRunning(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	s, err := supervisor.New(conn, supervisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(context.Background(), "x"); !errors.Is(err, supervisor.ErrUnavailable) {
		t.Fatalf("status before Run: %v", err)
	}
	if err := s.Register(nil); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("register nil: %v", err)
	}
	demoDef, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(demoDef, demoDef); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("register twice: %v", err)
	}
	if err := s.Register(demoDef); err != nil {
		t.Fatal(err)
	}
	other, err := supervisor.New(conn, supervisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Register(demoDef); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("register on a second supervisor: %v", err)
	}
	if _, err := supervisor.New(nil, supervisor.Options{}); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("New(nil): %v", err)
	}
	if _, err := supervisor.NewClient(nil); !errors.Is(err, supervisor.ErrInvalid) {
		t.Fatalf("NewClient(nil): %v", err)
	}
}
