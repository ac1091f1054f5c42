package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// fastBatch writes many messages to one stream with JetStream's fast batch
// publishing (nats-server 2.14 and later, a stream with AllowBatchPublish):
// the messages go out back to back, each with a reply subject naming the
// batch, its sequence in it and its operation
// (<inbox>.<batch>.<flow>.<gap>.<seq>.<op>.$FI), and the server answers
// flow acknowledgements now and then and one publish acknowledgement for
// the commit, the last message. In "gap: fail" mode that acknowledgement
// says every message of the batch was stored; a lost one fails the batch.
// It replaces a publish acknowledgement per message.
//
// A fastBatch is used by one goroutine at a time.
type fastBatch struct {
	nc    *nats.Conn
	inbox string
	sub   *nats.Subscription
}

// Operations of a fast batch message (the server's FastBatchOp*).
const (
	fastStart  = 0
	fastAppend = 1
	fastCommit = 2
)

// fastFlow asks the server for a flow acknowledgement every this many
// messages at most (it sends fewer when several batches run at once).
const fastFlow = indexBatch

func newFastBatch(nc *nats.Conn) (*fastBatch, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox + ".>")
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	return &fastBatch{nc: nc, inbox: inbox, sub: sub}, nil
}

func (f *fastBatch) close() { _ = f.sub.Unsubscribe() }

// publish writes msgs (subjects and bodies only) as one batch and waits up
// to 30 s for the server to confirm them all.
func (f *fastBatch) publish(ctx context.Context, msgs []*nats.Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	id := nats.NewInbox()[len(nats.InboxPrefix):] // a nuid: 22 characters
	for i, m := range msgs {
		op := fastAppend
		switch {
		case i == len(msgs)-1:
			op = fastCommit
		case i == 0:
			op = fastStart
		}
		m.Reply = f.inbox + "." + id + "." + strconv.Itoa(fastFlow) + ".fail." + strconv.Itoa(i+1) + "." + strconv.Itoa(op) + ".$FI"
		if err := f.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("fast batch: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		r, err := f.sub.NextMsgWithContext(ctx)
		if err != nil {
			return fmt.Errorf("fast batch of %d: no acknowledgement: %w", len(msgs), err)
		}
		if !strings.Contains(r.Subject, "."+id+".") {
			continue // an earlier batch's late answer
		}
		if bytes.HasPrefix(r.Data, []byte(`{"type":`)) {
			var flow struct {
				Type  string `json:"type"`
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if json.Unmarshal(r.Data, &flow) == nil && flow.Type == "err" && flow.Error != nil {
				return fmt.Errorf("fast batch: %s", flow.Error.Description)
			}
			continue // a flow acknowledgement, or a gap the commit will report
		}
		var ack struct {
			Stream string `json:"stream"`
			Batch  string `json:"batch"`
			Count  int    `json:"count"`
			Error  *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Data, &ack); err != nil {
			return fmt.Errorf("fast batch: acknowledgement %q: %w", r.Data, err)
		}
		switch {
		case ack.Error != nil:
			return fmt.Errorf("fast batch: %s", ack.Error.Description)
		case ack.Batch != id || ack.Count != len(msgs):
			return fmt.Errorf("fast batch of %d: the server stored %d", len(msgs), ack.Count)
		}
		return nil
	}
}
