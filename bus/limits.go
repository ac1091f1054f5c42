package bus

import (
	"errors"
	"math"
	"net/textproto"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxHeaderBytes is the largest header block JetStream stores: nats-server
// keeps a message's header length in 16 bits and refuses a longer one with
// API error 10097 "header size exceeds maximum allowed of 64k"
// (server/stream.go, processJetStreamMsgWithBatch; on a cluster
// checkMsgHeadersPreClusteredProposal in server/jetstream_batching.go). The
// header block counts as nats.go writes it: "NATS/1.0\r\n", a
// "Key: Value\r\n" line per value, and a closing "\r\n".
const MaxHeaderBytes = math.MaxUint16

// JetStream API error codes of writes that can never succeed as sent.
const (
	// errCodeMessageTooLarge: "message size exceeds maximum allowed"
	// (headers plus payload above the stream's MaxMsgSize or the server's
	// max_payload).
	errCodeMessageTooLarge = 10054
	// errCodeHeaderTooLarge: "header size exceeds maximum allowed of 64k".
	errCodeHeaderTooLarge = 10097
)

// ErrTooLarge is matched by errors of [Unpublishable] for a message that
// exceeds a limit of the server.
var ErrTooLarge = errors.New("message too large for the server")

// MaxPayload returns the largest message the server accepts from this
// connection, headers included (the server's max_payload, 1 MiB by default).
func (c *Conn) MaxPayload() int64 { return c.NATS().MaxPayload() }

// HeaderSize returns the size of h on the wire, as nats.go writes it and
// nats-server counts it against [MaxHeaderBytes] and max_payload: 0 for no
// header.
func HeaderSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += HeaderLineSize(k, v)
		}
	}
	return n
}

// HeaderLineSize is the size of one header line "Key: Value\r\n".
func HeaderLineSize(key, value string) int {
	return len(key) + len(textproto.TrimString(value)) + 4
}

// Unpublishable reports whether err, returned by a publish, means the
// message can never be published as it is, so retrying it is pointless: it is
// too large for the connection or the stream (then err matches
// [ErrTooLarge]), its subject or headers are malformed. A server that is down
// or slow gives errors for which it reports false.
func Unpublishable(err error) bool {
	if err == nil {
		return false
	}
	return TooLarge(err) || errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrBadHeaderMsg) ||
		errors.Is(err, nats.ErrHeadersNotSupported) || errors.Is(err, ErrForbidden)
}

// TooLarge reports whether err, returned by a publish, means the message
// exceeds the server's max_payload, the stream's MaxMsgSize or the header
// limit ([MaxHeaderBytes]).
func TooLarge(err error) bool {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeMessageTooLarge, errCodeHeaderTooLarge:
			return true
		}
	}
	return false
}
