package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, s := range []string{"p1", "a-b_c:d", "order.7", "a*", ">", "~p1", "with space", strings.Repeat("x", 256), strings.Repeat("x", 257),
		strings.Repeat("~", 256), strings.Repeat("é", 128), strings.Repeat("x", 3100), strings.Repeat("x", 3101), strings.Repeat("a b", 400_000)} {
		tok := token(s)
		if strings.ContainsAny(tok, ".*> \t") || tok == "" {
			t.Errorf("token(%q) = %q: not one subject token", s, tok)
		}
		if prev, dup := seen[tok]; dup {
			t.Errorf("token(%q) = token(%q) = %q", s, prev, tok)
		}
		seen[tok] = s
		// 256 bytes that all need encoding give the longest token.
		if len(tok) > maxToken {
			t.Errorf("token of %d bytes is %d bytes long, more than %d", len(s), len(tok), maxToken)
		}
	}
	if token("p1") != "p1" || token("~p1") == "~p1" {
		t.Error("plain tokens must stay as they are, and only they")
	}
}

// maxToken is the longest token: "~" and 256 bytes in base64url.
const maxToken = 1 + (4*maxValue+2)/3

func TestBoundedKeepsValidValues(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "p1", strings.Repeat("x", maxValue)} {
		if got := bounded(s); got != s {
			t.Errorf("bounded(%d bytes) = %q, want the value itself", len(s), got)
		}
	}
	long := strings.Repeat("x", maxValue+1)
	if got := bounded(long); len(got) != 45 || got != bounded(long) || got == bounded(long+"y") || got != token(long) {
		t.Errorf("bounded(%d bytes) = %q: want a stable 45-byte digest, distinct per value, equal to its token", len(long), got)
	}
}

func TestServiceErrorMatches(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		invalid(ErrBadCursor, "x"), invalid(ErrPageTooLarge, "x"), invalid(ErrUnknownKind, "x"),
		invalidf("x"), ErrNotFound, ErrUnavailable,
	} {
		code, kind := serviceErrors.Encode(err)
		remote := &ServiceError{Code: code, Kind: kind, Message: err.Error()}
		for _, target := range []error{ErrInvalid, ErrBadCursor, ErrPageTooLarge, ErrUnknownKind, ErrNotFound, ErrUnavailable} {
			if errors.Is(remote, target) != errors.Is(err, target) {
				t.Errorf("%v: remote matches %v: %v, local %v", err, target, errors.Is(remote, target), errors.Is(err, target))
			}
		}
	}
}

// TestServiceErrorsOnTheWire: the store's errors go through the shared
// table with the codes and kinds the store answered before it used it, in
// both reason headers.
func TestServiceErrorsOnTheWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code string
		kind string
	}{
		{invalid(ErrBadCursor, "x"), "400", "bad_cursor"},
		{invalid(ErrPageTooLarge, "x"), "400", "page_too_large"},
		{invalid(ErrUnknownKind, "x"), "400", "unknown_kind"},
		{invalidf("x"), "400", "invalid"},
		{fmt.Errorf("get: %w", ErrNotFound), "404", "not_found"},
		{fmt.Errorf("x: %w", ErrUnavailable), "503", "unavailable"},
		{errors.New("boom"), "500", "internal"},
		{&ServiceError{Code: 503, Kind: "unavailable", Message: "store server stopping"}, "503", "unavailable"},
	} {
		h := errorHeader(tc.err)
		if h.Get("Nats-Service-Error-Code") != tc.code || h.Get("Ea-Store-Error") != tc.kind || h.Get("EA-Error-Reason") != tc.kind || h.Get("Nats-Service-Error") == "" {
			t.Errorf("%v: headers %v, want code %s kind %s", tc.err, h, tc.code, tc.kind)
		}
	}
	// A reply of a store that set only Ea-Store-Error reads the same.
	old := &ServiceError{Code: 400, Kind: "bad_cursor"}
	if !errors.Is(old, ErrBadCursor) || !errors.Is(old, ErrInvalid) || errors.Is(old, ErrNotFound) {
		t.Error("a bad_cursor reply must match ErrBadCursor and ErrInvalid only")
	}
}
