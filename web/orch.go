package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The orchestration API (<prefix>.orch.*, served by supervisors) asked over
// NATS request-reply. The gateway speaks it itself rather than through
// package supervisor, which serves the gateway (supervisor.Command) and so
// may not be imported here.

// Operations of the orchestration API.
const (
	orchStart  = "start"
	orchStatus = "status"
	orchInput  = "input"
	orchCancel = "cancel"
)

// orchError is an error answered by the orchestration API, or no answer.
type orchError struct {
	code string // one of the Code* error codes
	msg  string
}

func (e *orchError) Error() string { return e.msg }

// orchCall sends req to <prefix>.orch.<op> and decodes the reply into rep.
func (g *Gateway) orchCall(ctx context.Context, op string, req, rep any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return &orchError{code: CodeBadRequest, msg: fmt.Sprintf("encode request: %v", err)}
	}
	subject := g.names.Orch(op)
	msg, err := g.conn.NC.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return &orchError{code: CodeUnavailable, msg: fmt.Sprintf("nobody answers %s: start ea-supervisor", subject)}
	}
	if err != nil {
		return &orchError{code: CodeUnavailable, msg: fmt.Sprintf("%s: %v", subject, err)}
	}
	if text := msg.Header.Get("Nats-Service-Error-Code"); text != "" {
		n, _ := strconv.Atoi(text)
		e := &orchError{msg: msg.Header.Get("Nats-Service-Error")}
		switch n {
		case 400:
			e.code = CodeBadRequest
		case 404:
			e.code = CodeNotFound
		case 409:
			e.code = CodeNotWaiting
			if strings.HasPrefix(e.msg, "orchestration changed concurrently") {
				e.code = CodeConflict
			}
		case 410:
			e.code = CodeFinished
		case 503:
			e.code = CodeUnavailable
		default:
			e.code = CodeInternal
		}
		return e
	}
	if err := json.Unmarshal(msg.Data, rep); err != nil {
		return &orchError{code: CodeInternal, msg: fmt.Sprintf("decode reply of %s: %v", subject, err)}
	}
	return nil
}
