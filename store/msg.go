package store

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

type jetstreamMsg = nats.Msg

func newIndexMsg(subject, id string, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set("Nats-Msg-Id", id)
	m.Data = body
	return m
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
