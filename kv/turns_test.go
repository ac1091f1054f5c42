package kv

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestKeyTurns(t *testing.T) {
	t.Parallel()
	var k keyTurns
	ctx := t.Context()
	if err := k.acquire(ctx, "a"); err != nil {
		t.Fatalf("acquire a: %v", err)
	}
	if err := k.acquire(ctx, "b"); err != nil { // another key does not wait
		t.Fatalf("acquire b: %v", err)
	}

	// A second caller of a waits, and gives up when its context ends.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := k.acquire(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire a while held: err = %v, want DeadlineExceeded", err)
	}

	// A waiting caller gets the turn once the holder releases it.
	got := make(chan error, 1)
	go func() { got <- k.acquire(ctx, "a") }()
	k.release("a")
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("acquire a after release: %v", err)
		}
	case <-timer.C:
		t.Fatal("the waiting caller did not get the turn")
	}
	k.release("a")
	k.release("b")
	if len(k.keys) != 0 {
		t.Errorf("%d keys remembered after every turn ended, want 0", len(k.keys))
	}
}
