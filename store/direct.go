package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// stored is one message read from a stream with a direct get.
type stored struct {
	stream  string
	seq     uint64
	subject string
	time    time.Time // when the stream stored it
	header  nats.Header
	data    []byte
}

// directReq is JetStream's direct get request ($JS.API.DIRECT.GET.<stream>).
type directReq struct {
	Seq       uint64     `json:"seq,omitempty"`
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// direct reads streams with JetStream's direct get API: one request returns
// up to a batch of messages matching a subject filter from a sequence, with
// no consumer to create. Streams need AllowDirect (every stream the store
// reads has it).
type direct struct {
	nc *nats.Conn
}

func directSubject(stream string) string { return "$JS.API.DIRECT.GET." + stream }

// batch returns up to n messages of stream matching filter with sequence >=
// from (or stored at or after since, when since is set and from is 0), and
// how many more match after the last one returned.
func (d direct) batch(ctx context.Context, stream, filter string, from uint64, since *time.Time, n int) ([]stored, uint64, error) {
	return d.batchMax(ctx, stream, filter, from, since, n, 0)
}

// directBatchBytes bounds one direct get answer. The server queues a whole
// batch for the client at once, and cuts off a client that falls 64 MB
// behind (its max_pending) as a slow consumer: a 32 MB batch of 900 KB
// dead letters did that to a race-built client every time, and the
// answers lost with the connection were waited for forever.
const directBatchBytes = 8 << 20

// directIdle bounds the wait for the next message of an answer: past it the
// answer is taken as lost (a connection dropped by the server loses it).
const directIdle = 10 * time.Second

// batchMax is batch answering at most about maxBytes (the server stops
// after the message that reaches it, so at least one comes); 0, or more
// than directBatchBytes, asks for directBatchBytes.
func (d direct) batchMax(ctx context.Context, stream, filter string, from uint64, since *time.Time, n, maxBytes int) ([]stored, uint64, error) {
	if maxBytes <= 0 || maxBytes > directBatchBytes {
		maxBytes = directBatchBytes
	}
	req := directReq{Seq: from, NextFor: filter, Batch: n, MaxBytes: maxBytes}
	if from == 0 && since != nil {
		req.StartTime = since
	} else if from == 0 {
		req.Seq = 1
	}
	body, _ := json.Marshal(req)
	inbox := d.nc.NewRespInbox()
	sub, err := d.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := d.nc.PublishRequest(directSubject(stream), inbox, body); err != nil {
		return nil, 0, err
	}
	var out []stored
	for {
		wait, cancel := context.WithTimeout(ctx, directIdle)
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("%w: stream %s: no answer for %s (lost with a dropped connection?)", ErrUnavailable, stream, directIdle)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", stream, err)
		}
		status := msg.Header.Get("Status")
		switch status {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "404":
			return out, 0, nil
		case "503":
			return nil, 0, fmt.Errorf("%w: stream %s: no responders", ErrUnavailable, stream)
		default:
			return nil, 0, fmt.Errorf("read %s: status %s %s", stream, status, msg.Header.Get("Description"))
		}
		s, err := parseStored(msg)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, s)
	}
}

// count returns how many messages of stream match filter.
func (d direct) count(ctx context.Context, stream, filter string) (uint64, error) {
	got, pending, err := d.batch(ctx, stream, filter, 0, nil, 1)
	if err != nil || len(got) == 0 {
		return 0, err
	}
	return 1 + pending, nil
}

// getRef names one message to load.
type getRef struct {
	stream string
	seq    uint64 // or
	last   string // the last message of this subject
}

// get loads the messages refs name, pipelined over one inbox: one round trip
// for the lot. A message that is not there (deleted, aged out) is left
// zero (seq 0) in the result.
func (d direct) get(ctx context.Context, refs []getRef) ([]stored, error) {
	out := make([]stored, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	prefix := d.nc.NewRespInbox()
	sub, err := d.nc.SubscribeSync(prefix + ".*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	for i, r := range refs {
		body, _ := json.Marshal(directReq{Seq: r.seq, LastFor: r.last})
		if err := d.nc.PublishRequest(directSubject(r.stream), prefix+"."+strconv.Itoa(i), body); err != nil {
			return nil, err
		}
	}
	for range refs {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("load records: %w", err)
		}
		i, err := strconv.Atoi(msg.Subject[len(prefix)+1:])
		if err != nil || i < 0 || i >= len(refs) {
			continue
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "404":
			continue
		case "503":
			return nil, fmt.Errorf("%w: stream %s: no responders", ErrUnavailable, refs[i].stream)
		default:
			return nil, fmt.Errorf("load %s: status %s %s", refs[i].stream, status, msg.Header.Get("Description"))
		}
		s, err := parseStored(msg)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func parseStored(msg *nats.Msg) (stored, error) {
	h := msg.Header
	seq, err := strconv.ParseUint(h.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return stored{}, fmt.Errorf("direct get reply without a sequence: %w", err)
	}
	ts, _ := time.Parse(time.RFC3339Nano, h.Get("Nats-Time-Stamp"))
	s := stored{stream: h.Get("Nats-Stream"), seq: seq, subject: h.Get("Nats-Subject"), time: ts, data: msg.Data}
	for _, k := range []string{"Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending", "Nats-Last-Sequence"} {
		delete(h, k)
	}
	s.header = h
	return s, nil
}
