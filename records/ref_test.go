package records_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/records"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring of the error; "" for valid
	}{
		{"simple", "counter", ""},
		{"all classes", "Az09_-", ""},
		{"one char", "a", ""},
		{"max length", strings.Repeat("k", 128), ""},
		{"empty", "", "(got empty)"},
		{"too long", strings.Repeat("k", 129), "(got 129 characters)"},
		{"dot", "a.b", "(got '.')"},
		{"space", "a b", "(got ' ')"},
		{"slash", "a/b", "(got '/')"},
		{"star", "*", "(got '*')"},
		{"gt", ">", "(got '>')"},
		{"nul", "a\x00", `(got '\x00')`},
		{"non-ascii", "caf\u00e9", `(got '\u00e9')`},
		{"invalid utf8", "a\xff", `(got '\xff')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for what, validate := range map[string]func(string) error{
				"kind": records.ValidateKind,
				"id":   records.ValidateID,
			} {
				err := validate(tt.in)
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("Validate %s(%q) = %v, want nil", what, tt.in, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("Validate %s(%q) = nil, want error", what, tt.in)
				}
				if !errors.Is(err, records.ErrInvalidName) {
					t.Errorf("error %v does not match ErrInvalidName", err)
				}
				var ne *records.NameError
				if !errors.As(err, &ne) || ne.What != what || ne.Value != tt.in {
					t.Errorf("error %#v: want *NameError{What: %q, Value: %q}", err, what, tt.in)
				}
				msg := err.Error()
				if !strings.Contains(msg, tt.wantErr) || !strings.Contains(msg, "must be 1-128 characters of A-Z a-z 0-9 _ -") {
					t.Errorf("error %q: want what is allowed and %q", msg, tt.wantErr)
				}
				if !strings.HasPrefix(msg, "invalid effector "+what+" ") {
					t.Errorf("error %q does not name the %s", msg, what)
				}
			}
		})
	}
}

func TestNameErrorMessage(t *testing.T) {
	err := records.ValidateKind("a.b")
	want := `invalid effector kind "a.b": must be 1-128 characters of A-Z a-z 0-9 _ - (got '.')`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}

	long := strings.Repeat("x", 1000) + "."
	err = records.ValidateID(long)
	if err == nil {
		t.Fatal("want error")
	}
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "(1001 bytes)") || !strings.Contains(msg, "(got '.')") {
		t.Errorf("long value not cut short in %q", msg)
	}
	var ne *records.NameError
	if !errors.As(err, &ne) || ne.Value != long {
		t.Errorf("NameError.Value should hold the full value")
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		in       string
		want     records.Ref
		wantWhat string // NameError.What; "" for valid
	}{
		{"counter/c1", records.Ref{Kind: "counter", ID: "c1"}, ""},
		{"A_-9/z-_0", records.Ref{Kind: "A_-9", ID: "z-_0"}, ""},
		{"", records.Ref{}, "ref"},
		{"counter", records.Ref{}, "ref"},
		{"/c1", records.Ref{}, "kind"},
		{"counter/", records.Ref{}, "id"},
		{"/", records.Ref{}, "kind"},
		{"a.b/c1", records.Ref{}, "kind"},
		{"counter/c.1", records.Ref{}, "id"},
		{"counter/c1/x", records.Ref{}, "id"},
		{"counter /c1", records.Ref{}, "kind"},
		{strings.Repeat("k", 129) + "/c1", records.Ref{}, "kind"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := records.ParseRef(tt.in)
			if tt.wantWhat == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseRef(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
				}
				if s := got.String(); s != tt.in {
					t.Errorf("String() = %q, want %q", s, tt.in)
				}
				if err := got.Validate(); err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			var ne *records.NameError
			if !errors.As(err, &ne) || ne.What != tt.wantWhat || !errors.Is(err, records.ErrInvalidName) {
				t.Fatalf("ParseRef(%q) = %v, %v; want *NameError about the %s", tt.in, got, err, tt.wantWhat)
			}
			if !got.IsZero() {
				t.Errorf("ParseRef(%q) returned %v with an error", tt.in, got)
			}
		})
	}
	if _, err := records.ParseRef("counter"); err == nil || !strings.Contains(err.Error(), "must be <kind>/<id>") {
		t.Errorf("ParseRef without '/': error %v does not say the form", err)
	}
}

func TestRef(t *testing.T) {
	var zero records.Ref
	if !zero.IsZero() || zero.String() != "" {
		t.Errorf("zero Ref: IsZero %v, String %q", zero.IsZero(), zero.String())
	}
	if err := zero.Validate(); !errors.Is(err, records.ErrInvalidName) {
		t.Errorf("zero Ref Validate() = %v, want ErrInvalidName", err)
	}
	half := records.Ref{Kind: "counter"}
	if half.IsZero() {
		t.Error("Ref with a kind is not zero")
	}
	var ne *records.NameError
	if err := half.Validate(); !errors.As(err, &ne) || ne.What != "id" {
		t.Errorf("Ref without id: Validate() = %v, want an error about the id", err)
	}
	if err := (records.Ref{ID: "c1"}).Validate(); !errors.As(err, &ne) || ne.What != "kind" {
		t.Errorf("Ref without kind: Validate() = %v, want an error about the kind", err)
	}
}
