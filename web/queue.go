package web

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errSlowReader is what a producer gets when its frame waited too long for
// room in the send buffer.
var errSlowReader = errors.New("slow reader")

// errQueueClosed is what a producer gets once the connection is ending.
var errQueueClosed = errors.New("connection closing")

// sendQueue holds the frames waiting to be written to one client, bounded
// in bytes: push waits for room (at most a given time), pop waits for a
// frame. A frame larger than the limit is let in when the queue is empty,
// so one big record can still go out.
type sendQueue struct {
	limit int

	mu     sync.Mutex // guards the fields below
	frames [][]byte
	bytes  int
	peak   int
	closed bool
	room   chan struct{} // closed and replaced when bytes are freed
	ready  chan struct{} // closed and replaced when a frame is added
}

func newSendQueue(limit int) *sendQueue {
	return &sendQueue{limit: limit, room: make(chan struct{}), ready: make(chan struct{})}
}

// push adds b, waiting up to wait for room; errSlowReader when there was
// none in time, errQueueClosed after close, ctx's error when it ends.
func (q *sendQueue) push(ctx context.Context, b []byte, wait time.Duration) error {
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return errQueueClosed
		}
		if q.bytes == 0 || q.bytes+len(b) <= q.limit {
			q.frames = append(q.frames, b)
			q.bytes += len(b)
			q.peak = max(q.peak, q.bytes)
			close(q.ready)
			q.ready = make(chan struct{})
			q.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		room := q.room
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-room:
		case <-timer.C:
			return errSlowReader
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pop takes the oldest frame, waiting for one; errQueueClosed after close.
// done must be called with the frame once written, to free its room.
func (q *sendQueue) pop(ctx context.Context) ([]byte, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, errQueueClosed
		}
		if len(q.frames) > 0 {
			b := q.frames[0]
			q.frames[0] = nil
			q.frames = q.frames[1:]
			q.mu.Unlock()
			return b, nil
		}
		ready := q.ready
		q.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// done frees the room of a frame taken with pop.
func (q *sendQueue) done(b []byte) {
	q.mu.Lock()
	q.bytes -= len(b)
	if !q.closed {
		close(q.room)
		q.room = make(chan struct{})
	}
	q.mu.Unlock()
}

// close drops what is queued and wakes every waiter.
func (q *sendQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	q.frames = nil
	close(q.room)
	close(q.ready)
}

// stats returns the bytes queued now and the most ever queued.
func (q *sendQueue) stats() (now, peak int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes, q.peak
}
