package store

import (
	"errors"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"p1", "a-b_c:d", "order.7", "a*", ">", "~p1", "with space", strings.Repeat("x", 256), strings.Repeat("x", 257)} {
		tok := token(s)
		if strings.ContainsAny(tok, ".*> \t") || tok == "" {
			t.Errorf("token(%q) = %q: not one subject token", s, tok)
		}
		if prev, dup := seen[tok]; dup {
			t.Errorf("token(%q) = token(%q) = %q", s, prev, tok)
		}
		seen[tok] = s
	}
	if token("p1") != "p1" || token("~p1") == "~p1" {
		t.Error("plain tokens must stay as they are, and only they")
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
