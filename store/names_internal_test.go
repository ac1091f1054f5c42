package store

import (
	"errors"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
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
	for _, err := range []error{
		invalid(ErrBadCursor, "x"), invalid(ErrPageTooLarge, "x"), invalid(ErrUnknownKind, "x"),
		invalidf("x"), ErrNotFound, ErrUnavailable,
	} {
		code, kind := errorKind(err)
		remote := &ServiceError{Code: code, Kind: kind, Message: err.Error()}
		for _, target := range []error{ErrInvalid, ErrBadCursor, ErrPageTooLarge, ErrUnknownKind, ErrNotFound, ErrUnavailable} {
			if errors.Is(remote, target) != errors.Is(err, target) {
				t.Errorf("%v: remote matches %v: %v, local %v", err, target, errors.Is(remote, target), errors.Is(err, target))
			}
		}
	}
}
