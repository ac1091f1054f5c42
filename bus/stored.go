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
	req := struct {
		Seq        uint64 `json:"seq"`
		NextBySubj string `json:"next_by_subj,omitempty"`
	}{seq, subject}
	body, err := json.Marshal(req)
	if err != nil {
		return StoredMsg{}, err
	}
	reply, err := c.NATS().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return StoredMsg{}, fmt.Errorf("read %s seq %d: %w", stream, seq, err)
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
		return StoredMsg{}, fmt.Errorf("read %s seq %d: decode the answer: %w", stream, seq, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errCodeNoMessage:
		return StoredMsg{}, fmt.Errorf("read %s seq %d: %w", stream, seq, ErrNoMessage)
	case resp.Error != nil:
		return StoredMsg{}, fmt.Errorf("read %s seq %d: %s (code %d, error %d)", stream, seq, resp.Error.Description, resp.Error.Code, resp.Error.ErrCode)
	case resp.Message == nil:
		return StoredMsg{}, fmt.Errorf("read %s seq %d: answer without a message", stream, seq)
	}
	m := StoredMsg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time, Header: nats.Header{}}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return StoredMsg{}, fmt.Errorf("read %s seq %d: headers: %w", stream, seq, err)
		}
	}
	if subject == "" && m.Seq != seq {
		return StoredMsg{}, fmt.Errorf("read %s seq %d: answered with seq %d", stream, seq, m.Seq)
	}
	return m, nil
}
