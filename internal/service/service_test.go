package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

type req struct {
	ID    string          `json:"id"`
	State json.RawMessage `json:"state,omitempty"`
}

func TestDecode(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	for _, tc := range []struct {
		name, body string
		want       string // "" for success, else a part of the error
	}{
		{"valid", `{"id":"c1","state":{"a":1}}`, ""},
		{"spaces around", " \n{\"id\":\"c1\"}\t\n", ""},
		{"empty", ``, "empty"},
		{"blank", "  \n", "empty"},
		{"null", `null`, "not a JSON object"},
		{"array", `[{"id":"c1"}]`, "not a JSON object"},
		{"string", `"c1"`, "not a JSON object"},
		{"unknown field", `{"id":"c1","x":1}`, `unknown field "x"`},
		{"case variant", `{"ID":"c1"}`, `unknown field "ID": field names are case-sensitive ("id")`},
		{"duplicate", `{"id":"c1","id":"c2"}`, `field "id" given twice`},
		{"trailing object", `{"id":"c1"} {"id":"c2"}`, "data after the JSON object"},
		{"trailing junk", `{"id":"c1"}x`, "data after the JSON object"},
		{"truncated", `{"id":"c1"`, "unexpected EOF"},
		{"wrong type", `{"id":7}`, "cannot unmarshal number"},
		{"too large", `{"id":"` + long + `"}`, "it is 10009 bytes: at most 1000 are taken"},
		{"long unknown field", `{"` + long[:900] + `":1}`, `unknown field "` + long[:MaxEcho] + `"… (900 bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r req
			err := Decode([]byte(tc.body), &r, 1000, `{"id": "c1"}`)
			if tc.want == "" {
				if err != nil || r.ID != "c1" {
					t.Fatalf("got %+v, %v", r, err)
				}
				return
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrBadRequest saying %q", err, tc.want)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error text of %d bytes", len(err.Error()))
			}
		})
	}
}

var (
	errA = errors.New("a")
	errB = errors.New("b")
	errC = errors.New("c")
)

var (
	errBroad = errors.New("broad")
	table    = Table{{Err: errA, Code: 404, Reason: "a"}, {Err: errB, Code: 404, Reason: "b", Also: []error{errBroad}}, {Err: errC, Code: 409, Reason: "c"}}
)

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		reason string
	}{
		{fmt.Errorf("wrapped: %w", errB), 404, "b"},
		{errA, 404, "a"},
		{errC, 409, "c"},
		{fmt.Errorf("x: %w", ErrBadRequest), 400, ReasonBadRequest},
		{errors.New("other"), 500, ReasonInternal},
		{&Error{Code: 503, Reason: "relayed", Message: "m"}, 503, "relayed"},
	} {
		code, reason := table.Encode(tc.err)
		if code != tc.code || reason != tc.reason {
			t.Errorf("Encode(%v) = %d %s, want %d %s", tc.err, code, reason, tc.code, tc.reason)
		}
		h := table.Header(tc.err)
		if h.Get(HeaderCode) != fmt.Sprint(tc.code) || h.Get(HeaderReason) != tc.reason || h.Get(HeaderError) == "" {
			t.Errorf("Header(%v) = %v", tc.err, h)
		}
	}
	for _, tc := range []struct {
		code   int
		reason string
		target error
		want   bool
	}{
		{404, "b", errB, true},
		{404, "b", errA, false},
		{404, "b", errBroad, true}, // Also
		{404, "a", errBroad, false},
		{404, "", errA, true}, // no reason: the code's first entry
		{404, "", errB, false},
		{409, "a", errA, false}, // a reason of another code
		{404, "zzz", errA, false},
		{400, ReasonBadRequest, ErrBadRequest, true},
		{500, ReasonInternal, errA, false},
	} {
		if got := table.Is(tc.code, tc.reason, tc.target); got != tc.want {
			t.Errorf("Is(%d, %q, %v) = %v", tc.code, tc.reason, tc.target, got)
		}
	}
	h := table.Header(&Error{Code: 404, Reason: "a", Message: "line one\r\nline two"})
	if got := h.Get(HeaderError); got != "line one line two" {
		t.Errorf("relayed text %q", got)
	}
}

func TestText(t *testing.T) {
	long := strings.Repeat("é", 2000)
	got := Text(long)
	if len(got) > MaxErrorText+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("Text of %d bytes: %d bytes, valid %v", len(long), len(got), utf8.ValidString(got))
	}
	if q := Quote(long); !strings.HasSuffix(q, "… (4000 bytes)") || !utf8.ValidString(q) {
		t.Fatalf("Quote = %q", q)
	}
	if q := Quote("short"); q != `"short"` {
		t.Fatalf("Quote = %q", q)
	}
}

// FuzzRequest decodes arbitrary bodies: no panic; a refusal matches
// ErrBadRequest and stays short; an accepted body re-encodes to one that
// decodes to the same request.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{`{"id":"c1"}`, `{"id":"c1","state":[1]}`, `{"ID":"x"}`, `{"id":"a","id":"b"}`, `{}x`, `{"state":{"id":1}}`, "{\"id\":\"\xff\"}", `{"id":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r req
		err := Decode(body, &r, 4096, `{"id": "c1"}`)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not match ErrBadRequest", err)
			}
			if len(Text(err.Error())) > MaxErrorText+len("…") {
				t.Fatal("long text")
			}
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var r2 req
		if err := Decode(again, &r2, 0, ""); err != nil || r2.ID != r.ID {
			t.Fatalf("re-encoded %s: %+v %v", again, r2, err)
		}
	})
}
