package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of orchestration API requests. A request past them gets a 400 that
// echoes at most the first [maxEcho] bytes of what it refuses, and every
// reply's error text is at most [maxErrorText] bytes, so that a reply always
// fits in a NATS message (a 1 MiB id echoed whole did not, and got no reply).
const (
	// MaxRequestSize is the largest request body the orchestration API
	// takes, in bytes: 512 KiB, room for a large input while a reply
	// always fits the server's default 1 MiB max_payload.
	MaxRequestSize = 512 << 10
	// MaxFieldLength is the longest orchestration id or name, in bytes:
	// both are 1-128 of [A-Za-z0-9_-].
	MaxFieldLength = 128

	maxEcho      = 64
	maxErrorText = 1024
)

// echo quotes s for an error message, cut to its first maxEcho bytes (on a
// rune boundary) plus "…" and its length when longer.
func echo(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(prefix(s, maxEcho)), len(s))
}

// prefix is s cut to at most n bytes, on a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// checkSize refuses a request body larger than MaxRequestSize.
func checkSize(data []byte) error {
	if len(data) > MaxRequestSize {
		return invalidf("request body is %d bytes: at most %d (%d KiB) are taken; send a smaller input", len(data), MaxRequestSize, MaxRequestSize>>10)
	}
	return nil
}

// checkName refuses an orchestration name longer than MaxFieldLength.
func checkName(name string) error {
	if len(name) > MaxFieldLength {
		return invalidf("orchestration name %s is %d bytes: a name is 1-%d of [A-Za-z0-9_-]", echo(name), len(name), MaxFieldLength)
	}
	return nil
}

// errorText is err's message cut to maxErrorText bytes (the start, where the
// sentinel's text is, is kept: clients map codes by it).
func errorText(err error) string {
	s := err.Error()
	if len(s) <= maxErrorText {
		return s
	}
	return prefix(s, maxErrorText) + "…"
}

// jsonErrorText is a JSON decoding error's message with what it quotes of
// the request (an unknown field's name) cut as echo cuts it.
func jsonErrorText(err error) string {
	s := err.Error()
	const unknown = "json: unknown field "
	if rest, ok := strings.CutPrefix(s, unknown); ok {
		if field, err := strconv.Unquote(rest); err == nil {
			return unknown + echo(field)
		}
	}
	if len(s) > 2*maxEcho {
		return prefix(s, 2*maxEcho) + "…"
	}
	return s
}
