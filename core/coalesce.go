package core

import (
	"context"
	"iter"
	"strings"
	"sync"
	"time"
)

// Defaults of [Coalesce].
const (
	// DefaultCoalesceDelay is how long streamed text may wait for more text
	// to join it in one record.
	DefaultCoalesceDelay = 50 * time.Millisecond
	// DefaultCoalesceBytes is the size at which gathered text is published
	// at once.
	DefaultCoalesceBytes = 2048
)

// Coalesce says how streamed text (an LLM's tokens) is gathered into fewer,
// larger records: the first chunk of a record waits at most Delay for more
// text to join it, and gathered text goes out at once when it reaches Bytes,
// before any other record of the run (an event, the end), and when the
// stream ends. A slow stream (a chunk less often than Delay) still gets one
// record per chunk, at most Delay late; a fast one gets a record every
// Delay. The zero value is the defaults (50ms, 2 KiB).
type Coalesce struct {
	// Delay is the longest the first chunk of a record waits. Zero:
	// DefaultCoalesceDelay; negative: no coalescing, one record per chunk.
	Delay time.Duration
	// Bytes is the size at which gathered text goes out at once. Zero:
	// DefaultCoalesceBytes.
	Bytes int
}

// NoCoalesce publishes every chunk as its own record.
var NoCoalesce = Coalesce{Delay: -1}

// Off reports whether c publishes every chunk as its own record.
func (c Coalesce) Off() bool { return c.Delay < 0 }

func (c Coalesce) or() Coalesce {
	if c.Delay == 0 {
		c.Delay = DefaultCoalesceDelay
	}
	if c.Bytes <= 0 {
		c.Bytes = DefaultCoalesceBytes
	}
	return c
}

// Coalescer gathers chunks of text by the rule of a [Coalesce]. It is not
// safe for concurrent use: one loop adds chunks, asks [Coalescer.Due] when
// to flush, and flushes.
type Coalescer struct {
	cfg   Coalesce
	buf   strings.Builder
	since time.Time // when the first chunk in buf came
	now   func() time.Time
}

// NewCoalescer returns a coalescer for cfg.
func NewCoalescer(cfg Coalesce) *Coalescer {
	return &Coalescer{cfg: cfg.or(), now: time.Now}
}

// Add adds chunk. It returns text to publish now (flush true) when the
// gathered text reached its size, when coalescing is off, or when the text
// gathered is older than the delay already.
func (c *Coalescer) Add(chunk string) (text string, flush bool) {
	if c.cfg.Off() {
		return chunk, true
	}
	if chunk == "" {
		return "", false
	}
	if c.buf.Len() == 0 {
		c.since = c.now()
	}
	c.buf.WriteString(chunk)
	if c.buf.Len() >= c.cfg.Bytes || !c.now().Before(c.since.Add(c.cfg.Delay)) {
		return c.Flush()
	}
	return "", false
}

// Due returns when the gathered text must be published, and false when
// nothing is gathered.
func (c *Coalescer) Due() (time.Time, bool) {
	if c.buf.Len() == 0 {
		return time.Time{}, false
	}
	return c.since.Add(c.cfg.Delay), true
}

// Pending returns the size of the text gathered.
func (c *Coalescer) Pending() int { return c.buf.Len() }

// Flush returns the text gathered and forgets it; false when there is none.
func (c *Coalescer) Flush() (string, bool) {
	if c.buf.Len() == 0 {
		return "", false
	}
	s := c.buf.String()
	c.buf.Reset()
	return s, true
}

// CoalesceStream reads stream to its end, hands its text to emit gathered by
// cfg (see [Coalesce]; with the defaults, a chunk waits at most 50ms for
// more), and returns the final response (the [Delta] whose Final is set; a
// zero Response if the stream had none). An error of the stream or of emit
// ends the stream at once (its context is cancelled) and is returned; text
// gathered but not yet emitted is then dropped with the failed run. The
// stream runs on a goroutine of its own that has ended when CoalesceStream
// returns.
func CoalesceStream(ctx context.Context, cfg Coalesce, stream func(context.Context) iter.Seq2[Delta, error], emit func(text string) error) (Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type item struct {
		d   Delta
		err error
		end bool // the stream ended
	}
	ch := make(chan item, 64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		for d, err := range stream(ctx) {
			select {
			case ch <- item{d: d, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
		if ctx.Err() != nil {
			return // cancelled while the stream ended: not a complete answer
		}
		select {
		case ch <- item{end: true}:
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); wg.Wait() }() // the stream stops before this returns
	co := NewCoalescer(cfg)
	var final Response
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var due <-chan time.Time
		if at, ok := co.Due(); ok {
			if timer == nil {
				timer = time.NewTimer(time.Until(at))
			} else {
				timer.Reset(time.Until(at))
			}
			due = timer.C
		}
		select {
		case it, ok := <-ch:
			if !ok { // ctx ended before the stream did
				return final, E(CodeCancelled, "llm.stream", context.Cause(ctx))
			}
			if it.end {
				if text, ok := co.Flush(); ok {
					if err := emit(text); err != nil {
						return final, err
					}
				}
				return final, nil
			}
			if it.err != nil {
				return final, it.err
			}
			if it.d.Final != nil {
				final = *it.d.Final
				continue
			}
			if text, ok := co.Add(it.d.Text); ok {
				if err := emit(text); err != nil {
					return final, err
				}
			}
		case <-due:
			if text, ok := co.Flush(); ok {
				if err := emit(text); err != nil {
					return final, err
				}
			}
		}
	}
}
