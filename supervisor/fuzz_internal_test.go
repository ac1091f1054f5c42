package supervisor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/effectors/effectors/internal/service"
)

// FuzzOrchRequest feeds arbitrary bodies to the orchestration API's request
// decoders and checks (start, status, input, cancel) as a supervisor runs
// them before touching any state: none may panic; a refusal is a 400
// ErrInvalid whose reply text fits a NATS header and quotes at most 64
// bytes of the input; an accepted id or name passes the checks Start and
// Status apply, and an accepted input is valid JSON.
func FuzzOrchRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"demo","input":{"topic":"x"}}`, `{"name":"demo"}`, `{"id":"01JH5R4Q7Z3W9X2Y8V6T0S1R2Q"}`,
		`{"id":"x","input":null}`, `{"id":"x","input":[1,{"a":"b"}]}`, ``, `null`, `[]`, `"x"`, `{}`,
		`{"id":"x"} {"id":"y"}`, `{"id":"x"}]`, `{"id":"x","name":"y"}`, `{"id":"a.b"}`, `{"id":"*"}`,
		`{"name":"` + strings.Repeat("n", 200) + `"}`, `{"id":"` + strings.Repeat("i", 129) + `"}`,
		`{"input":1e999}`, "{\"id\":\"\xff\"}", `{"id":"x","input":{"a":`, `{"ID":"x"}`, `{"id":"x","id":"y"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) bool {
			t.Helper()
			if err == nil {
				return true
			}
			if !errors.Is(err, ErrInvalid) || codeOf(err) != CodeInvalid {
				t.Fatalf("%s: %v is not a 400 ErrInvalid", what, err)
			}
			h := apiErrors.Header(err)
			text := h.Get(service.HeaderError)
			if len(text) > service.MaxErrorText+len("…") || strings.ContainsAny(text, "\r\n") || h.Get(service.HeaderReason) != "invalid" {
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
		if !check("size", checkSize(body)) {
			return
		}
		var start StartRequest
		if check("start", decodeStrict(body, &start, "")) && check("start name", checkName(start.Name)) {
			if len(start.Input) > 0 && !json.Valid(start.Input) {
				t.Fatalf("accepted invalid input %q", start.Input)
			}
		}
		var id IDRequest
		if check("status/cancel", decodeStrict(body, &id, "")) && check("id", validID(id.ID)) && len(id.ID) > MaxFieldLength {
			t.Fatalf("accepted a %d-byte id", len(id.ID))
		}
		var in InputRequest
		if check("input", decodeStrict(body, &in, "")) && len(in.Input) > 0 && !json.Valid(in.Input) {
			t.Fatalf("accepted invalid input %q", in.Input)
		}
	})
}
