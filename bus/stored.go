package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrNoMessage: the stream holds no such message (never stored, or dropped
// by its limits).
var ErrNoMessage = errors.New("bus: no such message in the stream")

// errCodeNoMessage is JetStream's "no message found" (JSNoMessageFoundErr).
const errCodeNoMessage = 10037

// StoredMsg is a message as a stream holds it.
type StoredMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
	Time    time.Time
}

// StoredAt reads from stream's leader the message at seq or, when subject
// is not empty, the first at or after seq on subject. It answers what
// JetStream stored, to decide on that (an acknowledgement, a dead letter):
// not a direct get, which a replica may answer without the newest messages
// (nats.go's Stream.GetMsg goes direct on streams that allow it). Errors
// wrap [ErrNoMessage] when there is none.
func (c *Conn) StoredAt(ctx context.Context, stream string, seq uint64, subject string) (StoredMsg, error) {
	req := msgGetRequest{Seq: seq, NextBySubj: subject}
	return c.stored(ctx, stream, req, fmt.Sprintf("seq %d", seq))
}

// LastStored reads from stream's leader the last message on subject, as
// StoredAt does (what JetStream stored, not what a replica has applied so
// far). Errors wrap [ErrNoMessage] when there is none.
func (c *Conn) LastStored(ctx context.Context, stream, subject string) (StoredMsg, error) {
	return c.stored(ctx, stream, msgGetRequest{LastBySubj: subject}, "the last on "+subject)
}

// msgGetRequest is JetStream's STREAM.MSG.GET request.
type msgGetRequest struct {
	Seq        uint64 `json:"seq,omitempty"`
	NextBySubj string `json:"next_by_subj,omitempty"`
	LastBySubj string `json:"last_by_subj,omitempty"`
}

func (c *Conn) stored(ctx context.Context, stream string, req msgGetRequest, what string) (StoredMsg, error) {
	seq := req.Seq
	body, err := json.Marshal(req)
	if err != nil {
		return StoredMsg{}, err
	}
	reply, err := c.NATS().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return StoredMsg{}, fmt.Errorf("read %s %s: %w", stream, what, err)
	}
	var resp struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs,omitempty"`
			Data    []byte    `json:"data,omitempty"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return StoredMsg{}, fmt.Errorf("read %s %s: decode the answer: %w", stream, what, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errCodeNoMessage:
		return StoredMsg{}, fmt.Errorf("read %s %s: %w", stream, what, ErrNoMessage)
	case resp.Error != nil:
		return StoredMsg{}, fmt.Errorf("read %s %s: %s (code %d, error %d)", stream, what, resp.Error.Description, resp.Error.Code, resp.Error.ErrCode)
	case resp.Message == nil:
		return StoredMsg{}, fmt.Errorf("read %s %s: answer without a message", stream, what)
	}
	m := StoredMsg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time, Header: nats.Header{}}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return StoredMsg{}, fmt.Errorf("read %s %s: headers: %w", stream, what, err)
		}
	}
	if seq != 0 && req.NextBySubj == "" && m.Seq != seq {
		return StoredMsg{}, fmt.Errorf("read %s %s: answered with seq %d", stream, what, m.Seq)
	}
	return m, nil
}
