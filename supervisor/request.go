package supervisor

import (
	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/records"
)

// Limits of orchestration API requests. A request past them gets a 400 that
// quotes at most the first 64 bytes of what it refuses, and every reply's
// error text is at most 1 KiB, so that a reply always fits in a NATS message
// (a 1 MiB id echoed whole did not, and got no reply). Request bodies are
// decoded strictly: one JSON object, no unknown field, nothing after it.
const (
	// MaxRequestSize is the largest request body the orchestration API
	// takes, in bytes: 512 KiB, room for a large input while a reply
	// always fits the server's default 1 MiB max_payload.
	MaxRequestSize = 512 << 10
	// MaxFieldLength is the longest orchestration id or name, in bytes:
	// both are 1-128 of [A-Za-z0-9_-].
	MaxFieldLength = 128
)

// echo quotes s for an error message, cut to its first 64 bytes.
func echo(s string) string { return service.Quote(s) }

// checkSize refuses a request body larger than MaxRequestSize.
func checkSize(data []byte) error {
	if len(data) > MaxRequestSize {
		return invalidf("request body is %d bytes: at most %d (%d KiB) are taken; send a smaller input", len(data), MaxRequestSize, MaxRequestSize>>10)
	}
	return nil
}

// checkName refuses an orchestration name that is not 1-MaxFieldLength of
// [A-Za-z0-9_-]: no definition can have it.
func checkName(name string) error {
	switch {
	case name == "":
		return invalidf("empty orchestration name: say which orchestration to start, e.g. {\"name\": \"demo\"}")
	case len(name) > MaxFieldLength:
		return invalidf("orchestration name %s is %d bytes: a name is 1-%d of [A-Za-z0-9_-]", echo(name), len(name), MaxFieldLength)
	case records.ValidateKind(name) != nil:
		return invalidf("orchestration name %s: a name is 1-%d of [A-Za-z0-9_-]", echo(name), MaxFieldLength)
	}
	return nil
}

// errorText is err's message as a reply carries it: one line, at most 1 KiB.
func errorText(err error) string { return service.Text(err.Error()) }
