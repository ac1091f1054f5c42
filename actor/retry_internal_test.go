package actor

import (
	"errors"
	"testing"
)

// TestRetryOnIsHonoured: an error the kind's RetryOn refuses is permanent to
// the node, as in a graph.
func TestRetryOnIsHonoured(t *testing.T) {
	t.Parallel()
	errNo := errors.New("do not retry")
	k := Kind[int]{Name: "k",
		Retry: RetryPolicy{RetryOn: func(err error) bool { return !errors.Is(err, errNo) }},
		Logic: func(c *Context, s int) (int, error) {
			if c.Record().Type == "no" {
				return s, errNo
			}
			return s, errors.New("again")
		}}
	s, err := k.spec()
	if err != nil {
		t.Fatal(err)
	}
	if s.retry.Attempts != 4 {
		t.Fatalf("default attempts %d", s.retry.Attempts)
	}
	c := newCallContext(nil, &call{})
	c.rec.Type = "no"
	if _, err := s.run(c, nil); !IsPermanent(err) || !errors.Is(err, errNo) {
		t.Fatalf("refused error: %v, permanent %v", err, IsPermanent(err))
	}
	c.rec.Type = "yes"
	if _, err := s.run(c, nil); err == nil || IsPermanent(err) {
		t.Fatalf("accepted error: %v, permanent %v", err, IsPermanent(err))
	}
	bad := Kind[int]{Name: "k", Logic: k.Logic, Retry: RetryPolicy{Jitter: 2}}
	if _, err := bad.spec(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("jitter 2: %v", err)
	}
}
