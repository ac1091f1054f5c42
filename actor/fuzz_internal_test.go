package actor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/effectors/effectors/internal/service"
)

// fuzzState is a state type with the shapes hostile JSON aims at: numbers,
// strings, nesting.
type fuzzState struct {
	Count int64            `json:"count"`
	Name  string           `json:"name"`
	Tags  []string         `json:"tags"`
	Meta  map[string]int64 `json:"meta"`
}

// FuzzControlRequest feeds arbitrary bodies to the control request decoders
// (create, reset, terminate, state, activate) and a kind's JSON state
// decoder, as a node runs them on every request: none may panic; a refusal
// is a 400 ErrInvalid whose text fits a NATS header (one line, at most
// 1 KiB, valid where the input was) and quotes at most 64 bytes of the input;
// an accepted body names a valid effector and re-encodes to an equal
// request.
func FuzzControlRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c1"}`, `{"id":"c1","state":{"count":3}}`, `{"id":"c1","state":null}`, `{}`, ``, `null`, `[]`,
		`{"id":"c1"} {"id":"c2"}`, `{"id":"c1"}x`, `{"id":"c1","extra":1}`, `{"id":1}`, `{"id":"a.b"}`,
		`{"id":"*"}`, `{"id":">"}`, `{"id":"` + strings.Repeat("x", 129) + `"}`, `{"id":"c1","state":"text"}`,
		`{"id":"c1","state":{"count":1e400}}`, `{"id":"c1","state":{"count":"3"}}`, `{"ID":"c1"}`,
		`{"id":"c1","id":"c2"}`, "{\"id\":\"\xff\"}", `{"id":"c\u00e9"}`, `{"id":"c1","state":{"meta":{"a":-1}}}`,
		`{"id":"c1","state":[1,2]}`, " \t{\"id\":\"c1\"}\n", `{"id":"c1","state":{"tags":["` + strings.Repeat("t", 300) + `"]}}`,
		`{"` + strings.Repeat("k", 200) + `":1}`, `{"id":"c1","state":{"count":9223372036854775808}}`,
	} {
		f.Add([]byte(seed))
	}
	spec, err := Kind[fuzzState]{Name: "fuzz", Logic: func(*Context, fuzzState) (fuzzState, error) { return fuzzState{}, nil }}.spec()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var create CreateRequest
		check := func(what string, err error) bool {
			t.Helper()
			if err == nil {
				return true
			}
			var ce *ControlError
			if !errors.As(err, &ce) || ce.Code != 400 || ce.Reason != reasonInvalid || !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: %v is not a 400 ErrInvalid", what, err)
			}
			h := controlErrors.Header(err)
			text := h.Get(service.HeaderError)
			if len(text) > service.MaxErrorText+len("…") || strings.ContainsAny(text, "\r\n") || h.Get(service.HeaderCode) != "400" || h.Get(service.HeaderReason) != reasonInvalid {
				t.Fatalf("%s: header %v", what, h)
			}
			if utf8.Valid(body) && !utf8.ValidString(text) {
				t.Fatalf("%s: error text %q is not valid UTF-8", what, text)
			}
			if len(body) > 2*service.MaxEcho+8 && strings.Contains(text, string(body)) {
				t.Fatalf("%s: error text echoes the whole %d-byte body", what, len(body))
			}
			return false
		}
		if check("create", decodeRequest(body, &create, wantState)) {
			ref, err := checkedRef("fuzz", create.ID)
			if check("create id", err) {
				if ref.Validate() != nil {
					t.Fatalf("accepted invalid id %q", create.ID)
				}
				again, err := json.Marshal(create)
				if err != nil {
					t.Fatal(err)
				}
				var round CreateRequest
				if err := decodeRequest(again, &round, wantState); err != nil || round.ID != create.ID {
					t.Fatalf("re-encoded %s: %+v, %v", again, round, err)
				}
				if len(create.State) > 0 && string(create.State) != "null" {
					if mp, err := spec.fromJSON(create.State); err == nil && len(mp) == 0 {
						t.Fatalf("state %s decoded to nothing", create.State)
					}
				}
			}
		}
		var reset ResetRequest
		_ = check("reset", decodeRequest(body, &reset, wantState))
		ref, err := requestRef("fuzz", body)
		if check("terminate/state/activate", err) && ref.Validate() != nil {
			t.Fatalf("accepted invalid ref %v", ref)
		}
	})
}
