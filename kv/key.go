package kv

import (
	"fmt"
	"strings"
)

// keyRules is appended to invalid-key errors so the fix is in the message.
const keyRules = "use tokens of letters, digits and - _ / = separated by single dots"

// validateKey checks key the way JetStream does, before any I/O, and says
// what is wrong. It is on the hot path of every write, so it does not use a
// regular expression.
func validateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty (%s)", ErrInvalidKey, keyRules)
	}
	if key[0] == '.' || key[len(key)-1] == '.' {
		return fmt.Errorf("%w: starts or ends with a dot (%s)", ErrInvalidKey, keyRules)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '.':
			if key[i+1] == '.' { // the last byte is not a dot, so i+1 is in range
				return fmt.Errorf("%w: empty token between dots (%s)", ErrInvalidKey, keyRules)
			}
		case !keyByte(c):
			return fmt.Errorf("%w: character %q not allowed (%s)", ErrInvalidKey, rune(c), keyRules)
		}
	}
	return nil
}

// validatePattern checks a key pattern: a key whose tokens may also be * (any
// one token) or, as the last token, > (one or more tokens).
func validatePattern(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("%w: empty pattern (use > for every key)", ErrInvalidKey)
	}
	tokens := strings.Split(pattern, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return fmt.Errorf("%w: empty token in pattern (%s; * matches one token, > the rest)", ErrInvalidKey, keyRules)
		case tok == "*":
		case tok == ">":
			if i != len(tokens)-1 {
				return fmt.Errorf("%w: > must be the last token of a pattern", ErrInvalidKey)
			}
		default:
			for j := 0; j < len(tok); j++ {
				if !keyByte(tok[j]) {
					return fmt.Errorf("%w: character %q not allowed in pattern (%s; * matches one whole token, > the rest)",
						ErrInvalidKey, rune(tok[j]), keyRules)
				}
			}
		}
	}
	return nil
}

// keyByte reports whether c may appear in a key token.
func keyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '/' || c == '='
}
