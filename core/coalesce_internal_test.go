package core

import (
	"strings"
	"testing"
	"time"
)

// TestCoalescerRules checks the rule with a clock the test moves: text waits
// until the delay passed or the size is reached, and nothing is lost.
func TestCoalescerRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	c := NewCoalescer(Coalesce{Delay: 50 * time.Millisecond, Bytes: 10})
	c.now = func() time.Time { return now }

	if _, ok := c.Due(); ok {
		t.Fatal("due with nothing gathered")
	}
	if s, ok := c.Add("ab"); ok {
		t.Fatalf("first chunk flushed at once: %q", s)
	}
	if at, ok := c.Due(); !ok || !at.Equal(t0.Add(50*time.Millisecond)) {
		t.Fatalf("due %v %v, want 50ms after the first chunk", at, ok)
	}
	now = t0.Add(20 * time.Millisecond)
	if _, ok := c.Add(""); ok {
		t.Fatal("an empty chunk flushed")
	}
	if _, ok := c.Add("cd"); ok {
		t.Fatal("flushed before the delay and the size")
	}
	if at, _ := c.Due(); !at.Equal(t0.Add(50 * time.Millisecond)) {
		t.Fatalf("due moved to %v: the first chunk's wait bounds it", at)
	}
	// The size: 4 + 7 >= 10.
	if s, ok := c.Add("efghijk"); !ok || s != "abcdefghijk" {
		t.Fatalf("at the size: %q %v", s, ok)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d bytes left after a flush", c.Pending())
	}
	// The delay, seen by a chunk that comes late.
	now = t0.Add(time.Second)
	if _, ok := c.Add("x"); ok {
		t.Fatal("a lone chunk flushed at once")
	}
	now = now.Add(50 * time.Millisecond)
	if s, ok := c.Add("y"); !ok || s != "xy" {
		t.Fatalf("after the delay: %q %v", s, ok)
	}
	// Flush hands over what is left, once.
	c.Add("z")
	if s, ok := c.Flush(); !ok || s != "z" {
		t.Fatalf("flush %q %v", s, ok)
	}
	if _, ok := c.Flush(); ok {
		t.Fatal("a second flush had text")
	}

	off := NewCoalescer(NoCoalesce)
	for _, ch := range []string{"a", "b"} {
		if s, ok := off.Add(ch); !ok || s != ch {
			t.Fatalf("off: %q %v, want every chunk at once", s, ok)
		}
	}
	if d := NewCoalescer(Coalesce{}).cfg; d.Delay != DefaultCoalesceDelay || d.Bytes != DefaultCoalesceBytes {
		t.Fatalf("zero value = %+v, want the defaults", d)
	}
	big := NewCoalescer(Coalesce{})
	if s, ok := big.Add(strings.Repeat("w", DefaultCoalesceBytes)); !ok || len(s) != DefaultCoalesceBytes {
		t.Fatal("a chunk of the default size did not go out at once")
	}
}
