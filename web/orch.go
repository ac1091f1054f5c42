package web

import (
	"encoding/json"
	"errors"

	"github.com/effectors/effectors/supervisor"
)

// The orchestration requests (orch.start, orch.status, orch.input,
// orch.cancel) go to the orchestration API (<prefix>.orch.*, served by any
// running supervisor) through [supervisor.Client].

// orchFailure returns the error frame's code and error for err, an error of
// [supervisor.Client]: the code of the supervisor sentinel it matches, and
// the supervisor's own words when it answered.
func orchFailure(err error) (string, error) {
	var api *supervisor.APIError
	answered := errors.As(err, &api)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	code := CodeUnavailable // no answer: NATS failed or the request timed out
	switch {
	case errors.Is(err, supervisor.ErrInvalid):
		code = CodeBadRequest
	case errors.Is(err, supervisor.ErrUnknownOrchestration), errors.Is(err, supervisor.ErrUnknownName):
		code = CodeNotFound
	case errors.Is(err, supervisor.ErrConflict):
		code = CodeConflict
	case errors.Is(err, supervisor.ErrNotWaiting):
		code = CodeNotWaiting
	case errors.Is(err, supervisor.ErrFinished):
		code = CodeFinished
	case errors.Is(err, supervisor.ErrUnavailable):
		code = CodeUnavailable
	case answered, errors.As(err, &syntax), errors.As(err, &typ):
		code = CodeInternal // another error answered, or a reply that does not decode
	}
	if answered {
		return code, errors.New(api.Message)
	}
	return code, err
}
