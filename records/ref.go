package records

import (
	"strconv"
	"strings"
)

// MaxNameLen is the longest effector kind or id, in bytes.
const MaxNameLen = 128

// nameRule is what a kind or an id must be, as error messages say it.
const nameRule = "must be 1-128 characters of A-Z a-z 0-9 _ -"

// Ref names an effector: kind and id, each a single subject token
// [A-Za-z0-9_-]{1,128}. Its text form is "<kind>/<id>", the form of the
// EA-From header. The zero Ref means "no effector" (an outside publisher).
type Ref struct {
	Kind string
	ID   string
}

// String returns "<kind>/<id>", or "" for the zero Ref.
func (r Ref) String() string {
	if r.IsZero() {
		return ""
	}
	return r.Kind + "/" + r.ID
}

// IsZero reports whether r is the zero Ref.
func (r Ref) IsZero() bool { return r.Kind == "" && r.ID == "" }

// Validate reports whether both the kind and the id of r are valid, as
// [ValidateKind] and [ValidateID] do. The zero Ref is not valid.
func (r Ref) Validate() error {
	if err := ValidateKind(r.Kind); err != nil {
		return err
	}
	return ValidateID(r.ID)
}

// ParseRef parses "<kind>/<id>". Errors are [*NameError]s that match
// [ErrInvalidName].
func ParseRef(s string) (Ref, error) {
	kind, id, ok := strings.Cut(s, "/")
	if !ok {
		return Ref{}, &NameError{What: "ref", Value: s, Reason: "must be <kind>/<id> (got no '/')"}
	}
	r := Ref{Kind: kind, ID: id}
	if err := r.Validate(); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// ValidateKind reports whether s is a valid effector kind: 1-128
// characters of A-Z a-z 0-9 _ -, so that it is one NATS subject token.
// Errors are [*NameError]s that match [ErrInvalidName].
func ValidateKind(s string) error { return validateName("kind", s) }

// ValidateID reports whether s is a valid effector id: 1-128 characters of
// A-Z a-z 0-9 _ -, so that it is one NATS subject token. Errors are
// [*NameError]s that match [ErrInvalidName].
func ValidateID(s string) error { return validateName("id", s) }

func validateName(what, s string) error {
	if got := nameGot(s); got != "" {
		return &NameError{What: what, Value: s, Reason: nameRule + " (got " + got + ")"}
	}
	return nil
}

// nameGot returns "" when s is a valid kind or id, or else what was wrong
// with it, for the "(got …)" part of an error message.
func nameGot(s string) string {
	if s == "" {
		return "empty"
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return describeAt(s, i)
		}
	}
	// All ASCII from here on, so bytes are characters.
	if len(s) > MaxNameLen {
		return strconv.Itoa(len(s)) + " characters"
	}
	return ""
}

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
