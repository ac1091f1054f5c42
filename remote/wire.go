package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/retry"
)

// The contract's messages (docs/polyglot.md), with R the representation of
// an embedded value: json.RawMessage in JSON, mpValue in msgpack. Every
// field of a request is always present.

type wireRequest[R any] struct {
	V        int           `json:"v"`
	Kind     string        `json:"kind"`
	ID       string        `json:"id"`
	Record   wireRecord[R] `json:"record"`
	State    R             `json:"state"`
	Deadline string        `json:"deadline"`
}

type wireRecord[R any] struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	From        string `json:"from"`
	Process     string `json:"process"`
	Owner       string `json:"owner"`
	Cause       string `json:"cause"`
	Reply       string `json:"reply"`
	Priority    string `json:"priority"`
	Time        string `json:"time"`
	Seq         uint64 `json:"seq"`
	ContentType string `json:"content_type"`
	Payload     R      `json:"payload"`
}

type wireReply[R any] struct {
	V       int             `json:"v"`
	State   R               `json:"state"`
	Records []wireOutput[R] `json:"records"`
	Error   *wireError      `json:"error"`
}

type wireOutput[R any] struct {
	Op          string `json:"op"`
	To          string `json:"to"`
	Type        string `json:"type"`
	Payload     R      `json:"payload"`
	ContentType string `json:"content_type"`
	Priority    string `json:"priority"`
	Process     string `json:"process"`
	ReplyTo     string `json:"reply_to"`
}

type wireError struct {
	Message   string `json:"message"`
	Permanent bool   `json:"permanent"`
}

// mpValue is one msgpack value embedded as it is (empty: nil). The decoder
// zeroes it for a nil value, so nil and absent read the same; mpReply tells
// them apart where it matters (the state).
type mpValue struct{ b []byte }

func (v mpValue) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(v.b) == 0 {
		return enc.EncodeNil()
	}
	return enc.Encode(msgpack.RawMessage(v.b))
}

func (v *mpValue) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	v.b = raw
	return err
}

// mpReply is a msgpack reply. It decodes itself, to tell a present nil
// state from an absent one (the decoder zeroes a field for nil).
type mpReply struct {
	V        int
	HasState bool
	State    []byte
	Records  []wireOutput[mpValue]
	Error    *wireError
}

func (r *mpReply) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return errors.New("the reply is nil, not a map")
	}
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return err
		}
		switch key {
		case "v":
			err = dec.Decode(&r.V)
		case "state":
			r.HasState = true
			r.State, err = dec.DecodeRaw()
		case "records":
			err = dec.Decode(&r.Records)
		case "error":
			err = dec.Decode(&r.Error)
		default:
			return fmt.Errorf("unknown field %.64q", key)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// maxErrorText caps a worker's error message.
const maxErrorText = 1024

// request encodes the request for the record in hand and state s.
func (l *logic) request(ctx *actor.Context, s State) ([]byte, error) {
	rec, self := ctx.Record(), ctx.Self()
	deadline := time.Now().Add(l.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	switch l.enc {
	case JSON:
		payload, err := payloadJSON(rec)
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("%w the payload of record %s to JSON for the worker of kind %s (use the msgpack encoding): %w", ErrConvert, rec.ID, l.name, err))
		}
		state, err := msgpackToJSON(s)
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("%w the state of %s to JSON (use the msgpack encoding): %w", ErrConvert, self, err))
		}
		return json.Marshal(newRequest(self, rec, payload, state, deadline))
	default:
		payload, err := payloadMsgpack(rec)
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("%w the JSON payload of record %s to msgpack for the worker of kind %s: %w", ErrConvert, rec.ID, l.name, err))
		}
		return codec.Marshal(newRequest(self, rec, mpValue{payload}, mpValue{s}, deadline))
	}
}

// newRequest is the request about rec, sent to self, with its payload and
// the state already in the request's encoding.
func newRequest[R any](self records.Ref, rec records.Record, payload, state R, deadline time.Time) wireRequest[R] {
	ct := rec.ContentType
	if ct == "" {
		ct = records.ContentMsgpack
	}
	from := ""
	if !rec.From.IsZero() {
		from = rec.From.String()
	}
	return wireRequest[R]{
		V: Version, Kind: self.Kind, ID: self.ID,
		Record: wireRecord[R]{
			ID: rec.ID, Type: recType(rec), From: from, Process: rec.Process, Owner: rec.Owner, Cause: rec.Cause,
			Reply: rec.Reply, Priority: string(rec.Priority), Time: recTime(rec), Seq: rec.Seq, ContentType: ct,
			Payload: payload,
		},
		State:    state,
		Deadline: deadline.UTC().Format(time.RFC3339Nano),
	}
}

func recType(r records.Record) string {
	if r.Type == "" {
		return records.DefaultType
	}
	return r.Type
}

func recTime(r records.Record) string {
	if r.Time.IsZero() {
		return ""
	}
	return r.Time.UTC().Format(time.RFC3339Nano)
}

// payloadJSON is the record's payload as a JSON value (null when empty).
func payloadJSON(r records.Record) (json.RawMessage, error) {
	if len(r.Payload) == 0 {
		return json.RawMessage("null"), nil
	}
	if r.ContentType == records.ContentJSON {
		if !json.Valid(r.Payload) {
			return nil, errors.New("it is not valid JSON")
		}
		return json.RawMessage(r.Payload), nil
	}
	return msgpackToJSON(r.Payload)
}

// payloadMsgpack is the record's payload as a msgpack value (nil when empty).
func payloadMsgpack(r records.Record) ([]byte, error) {
	if len(r.Payload) == 0 || r.ContentType != records.ContentJSON {
		return r.Payload, nil
	}
	return codec.FromJSON(r.Payload)
}

// apply checks the reply, holds the records it asks to send (through ctx,
// so the runtime validates and routes them as any kind's) and returns the
// new state.
func (l *logic) apply(ctx *actor.Context, resp *nats.Msg) (State, error) {
	malformed := func(format string, args ...any) error {
		return retry.Permanent(fmt.Errorf("%w from the worker of kind %s: %s", ErrMalformed, l.name, fmt.Sprintf(format, args...)))
	}
	if len(resp.Data) > l.maxReply {
		return nil, malformed("%d bytes exceed MaxReply %d", len(resp.Data), l.maxReply)
	}
	enc := l.enc
	if ct := resp.Header.Get(records.HeaderContentType); ct != "" {
		switch Encoding(ct) {
		case JSON, Msgpack:
			enc = Encoding(ct)
		default:
			return nil, malformed("Content-Type %.64q: want %s or %s", ct, JSON, Msgpack)
		}
	}
	var (
		hasState bool
		state    []byte
		outs     []wireOutput[[]byte]
		werr     *wireError
		version  int
	)
	switch enc {
	case JSON:
		var rep wireReply[json.RawMessage]
		if err := decodeJSON(resp.Data, &rep); err != nil {
			return nil, malformed("JSON: %v", err)
		}
		version, werr, hasState = rep.V, rep.Error, rep.State != nil
		if len(rep.Records) > l.maxRecords {
			return nil, malformed("%d records to send exceed MaxRecords %d", len(rep.Records), l.maxRecords)
		}
		if hasState {
			b, err := codec.FromJSON(rep.State)
			if err != nil {
				return nil, malformed("state: %v", err)
			}
			state = b
		}
		for _, o := range rep.Records {
			var p []byte
			if o.Payload != nil && string(o.Payload) != "null" {
				p = o.Payload
			}
			outs = append(outs, wireOutput[[]byte]{Op: o.Op, To: o.To, Type: o.Type, Payload: p, ContentType: o.ContentType, Priority: o.Priority, Process: o.Process, ReplyTo: o.ReplyTo})
		}
	default:
		if err := checkMsgpack(resp.Data, maxDepth); err != nil {
			return nil, malformed("msgpack: %v", err)
		}
		var rep mpReply
		if err := decodeMsgpack(resp.Data, &rep); err != nil {
			return nil, malformed("msgpack: %v", err)
		}
		version, werr, hasState, state = rep.V, rep.Error, rep.HasState, rep.State
		if len(rep.Records) > l.maxRecords {
			return nil, malformed("%d records to send exceed MaxRecords %d", len(rep.Records), l.maxRecords)
		}
		for _, o := range rep.Records {
			var p []byte
			if len(o.Payload.b) > 0 && !(len(o.Payload.b) == 1 && o.Payload.b[0] == 0xc0) {
				p = o.Payload.b
			}
			outs = append(outs, wireOutput[[]byte]{Op: o.Op, To: o.To, Type: o.Type, Payload: p, ContentType: o.ContentType, Priority: o.Priority, Process: o.Process, ReplyTo: o.ReplyTo})
		}
	}
	if version != 0 && version != Version {
		return nil, malformed("protocol version %d: this node speaks %d", version, Version)
	}
	if werr != nil {
		msg := werr.Message
		if msg == "" {
			msg = "(no message)"
		}
		if len(msg) > maxErrorText {
			msg = strings.ToValidUTF8(msg[:maxErrorText], "") + "…"
		}
		e := &WorkerError{Kind: l.name, Message: msg, Permanent: werr.Permanent}
		if e.Permanent {
			return nil, retry.Permanent(e)
		}
		return nil, e
	}
	if !hasState {
		return nil, malformed(`it has neither "state" nor "error"`)
	}
	for i, o := range outs {
		if err := l.hold(ctx, enc, o); err != nil {
			return nil, malformed("record %d (%s %q): %v", i, o.Op, o.Type, err)
		}
	}
	if len(state) == 1 && state[0] == 0xc0 {
		state = nil // msgpack nil: the empty State
	}
	return State(state), nil
}

// hold gives one record of the reply to ctx: Send, Emit or Reply, which
// validate it exactly as for a Go kind.
func (l *logic) hold(ctx *actor.Context, enc Encoding, o wireOutput[[]byte]) error {
	ct := o.ContentType
	switch ct {
	case "":
		ct = records.ContentMsgpack
	case records.ContentMsgpack, records.ContentJSON:
	default:
		return fmt.Errorf("content_type %.64q: want %q, %q or empty (msgpack)", ct, records.ContentMsgpack, records.ContentJSON)
	}
	payload, err := convert(o.Payload, enc, ct)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	opts := []actor.SendOption{func(r *records.Record) error {
		r.Payload, r.ContentType = payload, ct
		return nil
	}}
	switch o.Priority {
	case "":
	case string(records.PriorityHigh):
		opts = append(opts, actor.High())
	default:
		return fmt.Errorf("priority %.64q: want %q or empty", o.Priority, records.PriorityHigh)
	}
	if o.Process != "" {
		opts = append(opts, actor.InProcess(o.Process))
	}
	if o.ReplyTo != "" {
		opts = append(opts, actor.ReplyTo(o.ReplyTo))
	}
	switch o.Op {
	case "send":
		to, err := records.ParseRef(o.To)
		if err != nil {
			return fmt.Errorf("to: %w", err)
		}
		return ctx.Send(to, o.Type, nil, opts...)
	case "emit", "reply":
		if o.To != "" {
			return fmt.Errorf(`"to" is only for op "send"`)
		}
		if o.Op == "emit" {
			return ctx.Emit(o.Type, nil, opts...)
		}
		return ctx.Reply(o.Type, nil, opts...)
	}
	return fmt.Errorf(`op %.64q: want "send", "emit" or "reply"`, o.Op)
}

// convert turns a payload in the reply's encoding enc into the bytes of
// content type ct. Empty stays empty.
func convert(p []byte, enc Encoding, ct string) ([]byte, error) {
	switch {
	case len(p) == 0:
		return nil, nil
	case string(enc) == ct:
		return bytes.Clone(p), nil
	case enc == JSON:
		return codec.FromJSON(p)
	default:
		return msgpackToJSON(p)
	}
}

// decodeJSON decodes exactly one JSON value into v, refusing unknown fields.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the reply object")
	}
	return nil
}

// decodeMsgpack decodes exactly one msgpack value into v, naming fields by
// their json tags and refusing unknown ones.
func decodeMsgpack(data []byte, v any) error {
	rd := bytes.NewReader(data)
	dec := msgpack.NewDecoder(rd)
	dec.SetCustomStructTag("json")
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rd.Len() > 0 {
		return fmt.Errorf("%d bytes after the reply map", rd.Len())
	}
	return nil
}

// msgpackToJSON converts one msgpack value (empty: nil) to JSON.
func msgpackToJSON(b []byte) (json.RawMessage, error) {
	if len(b) == 0 {
		return json.RawMessage("null"), nil
	}
	var v any
	if err := codec.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return out, nil
}
