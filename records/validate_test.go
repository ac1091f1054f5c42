package records_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/records"
)

// headerCase is one header value FromMsg must accept or reject.
type headerCase struct {
	header string
	value  string
	ok     bool
	check  func(records.Record) bool // for ok cases: is the field read right?
}

func headerCases() []headerCase {
	var (
		s128 = strings.Repeat("t", 128)
		s256 = strings.Repeat("i", 256)
	)
	typeIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.Type == s }
	}
	idIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.ID == s }
	}
	processIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.Process == s }
	}
	causeIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.Cause == s }
	}
	replyIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.Reply == s }
	}
	fromIs := func(kind, id string) func(records.Record) bool {
		return func(r records.Record) bool { return r.From == records.Ref{Kind: kind, ID: id} }
	}
	prioIs := func(p records.Priority) func(records.Record) bool {
		return func(r records.Record) bool { return r.Priority == p }
	}
	timeIs := func(s string) func(records.Record) bool {
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return func(r records.Record) bool { return r.Time.Equal(want) && r.Time.Location() == time.UTC }
	}
	ctIs := func(s string) func(records.Record) bool {
		return func(r records.Record) bool { return r.ContentType == s }
	}

	cases := []headerCase{
		// EA-Type
		{records.HeaderType, "inc", true, typeIs("inc")},
		{records.HeaderType, "a-Z_0.9:x/y", true, typeIs("a-Z_0.9:x/y")},
		{records.HeaderType, s128, true, typeIs(s128)},
		{records.HeaderType, "", true, typeIs(records.DefaultType)},
		{records.HeaderType, s128 + "t", false, nil},
		{records.HeaderType, "a b", false, nil},
		{records.HeaderType, "inc\r\nX: y", false, nil},
		{records.HeaderType, "a*", false, nil},
		{records.HeaderType, "caf\u00e9", false, nil},

		// EA-From
		{records.HeaderFrom, "counter/c1", true, fromIs("counter", "c1")},
		{records.HeaderFrom, "", true, fromIs("", "")},
		{records.HeaderFrom, "counter", false, nil},
		{records.HeaderFrom, "counter/", false, nil},
		{records.HeaderFrom, "/c1", false, nil},
		{records.HeaderFrom, "a.b/c1", false, nil},
		{records.HeaderFrom, "a/b/c", false, nil},

		// EA-Priority
		{records.HeaderPriority, "high", true, prioIs(records.PriorityHigh)},
		{records.HeaderPriority, "HIGH", true, prioIs(records.PriorityHigh)},
		{records.HeaderPriority, "High", true, prioIs(records.PriorityHigh)},
		{records.HeaderPriority, "", true, prioIs(records.PriorityNormal)},
		{records.HeaderPriority, "low", false, nil},
		{records.HeaderPriority, "normal", false, nil},
		{records.HeaderPriority, " high", false, nil},
		{records.HeaderPriority, "high ", false, nil},

		// EA-Time
		{records.HeaderTime, "2026-01-02T15:04:05Z", true, timeIs("2026-01-02T15:04:05Z")},
		{records.HeaderTime, "2026-01-02T15:04:05.123456789Z", true, timeIs("2026-01-02T15:04:05.123456789Z")},
		{records.HeaderTime, "2026-01-02T15:04:05.5+02:00", true, timeIs("2026-01-02T13:04:05.5Z")},
		{records.HeaderTime, "0000-01-01T00:00:00Z", true, timeIs("0000-01-01T00:00:00Z")},
		{records.HeaderTime, "9999-12-31T23:59:59.999999999Z", true, timeIs("9999-12-31T23:59:59.999999999Z")},
		{records.HeaderTime, "2026-01-02 15:04:05Z", false, nil},
		{records.HeaderTime, "2026-01-02", false, nil},
		{records.HeaderTime, "2026-13-02T15:04:05Z", false, nil},
		{records.HeaderTime, "2026-02-30T15:04:05Z", false, nil},
		{records.HeaderTime, "yesterday", false, nil},
		{records.HeaderTime, "1767366245", false, nil},
		// In range as written, out of range in UTC: could not be written back.
		{records.HeaderTime, "0000-01-01T00:00:00+01:00", false, nil},
		{records.HeaderTime, "9999-12-31T23:59:59-01:00", false, nil},

		// Content-Type
		{records.HeaderContentType, "", true, ctIs(records.ContentMsgpack)},
		{records.HeaderContentType, "application/msgpack", true, ctIs(records.ContentMsgpack)},
		{records.HeaderContentType, "application/x-msgpack", true, ctIs(records.ContentMsgpack)},
		{records.HeaderContentType, "Application/MsgPack", true, ctIs(records.ContentMsgpack)},
		{records.HeaderContentType, "application/json", true, ctIs(records.ContentJSON)},
		{records.HeaderContentType, "application/json; charset=utf-8", true, ctIs(records.ContentJSON)},
		{records.HeaderContentType, "APPLICATION/JSON", true, ctIs(records.ContentJSON)},
		{records.HeaderContentType, "text/plain", false, nil},
		{records.HeaderContentType, "application/octet-stream", false, nil},
		{records.HeaderContentType, "json", false, nil},
		{records.HeaderContentType, "application/json; charset", false, nil},
		{records.HeaderContentType, "application/", false, nil},

		// EA-Reply
		{records.HeaderReply, "ea.mbox.counter.c1", true, replyIs("ea.mbox.counter.c1")},
		{records.HeaderReply, "_INBOX.abc123", true, replyIs("_INBOX.abc123")},
		{records.HeaderReply, "a", true, replyIs("a")},
		{records.HeaderReply, "a*b.c>d", true, replyIs("a*b.c>d")},
		{records.HeaderReply, "caf\u00e9.x", true, replyIs("caf\u00e9.x")},
		{records.HeaderReply, strings.Repeat("a.", 255) + "ab", true, replyIs(strings.Repeat("a.", 255) + "ab")},
		{records.HeaderReply, strings.Repeat("a.", 256) + "a", false, nil},
		{records.HeaderReply, "ea.mbox.*", false, nil},
		{records.HeaderReply, "ea.>", false, nil},
		{records.HeaderReply, "*", false, nil},
		{records.HeaderReply, ">", false, nil},
		{records.HeaderReply, "ea..x", false, nil},
		{records.HeaderReply, ".ea", false, nil},
		{records.HeaderReply, "ea.", false, nil},
		{records.HeaderReply, ".", false, nil},
		{records.HeaderReply, "ea mbox", false, nil},
		{records.HeaderReply, "ea\tmbox", false, nil},
		{records.HeaderReply, "ea\r\nmbox", false, nil},
		{records.HeaderReply, "ea\x7f", false, nil},
		{records.HeaderReply, "ea\u00a0x", false, nil},
		{records.HeaderReply, "ea\xff", false, nil},
	}

	// Nats-Msg-Id, EA-Process and EA-Cause share one rule.
	for _, id := range []struct {
		header string
		is     func(string) func(records.Record) bool
	}{
		{records.HeaderID, idIs},
		{records.HeaderProcess, processIs},
		{records.HeaderCause, causeIs},
	} {
		cases = append(cases,
			headerCase{id.header, "01JH5R4Q7Z3W9X2Y8V6T0S1R2Q", true, id.is("01JH5R4Q7Z3W9X2Y8V6T0S1R2Q")},
			headerCase{id.header, "abc:1", true, id.is("abc:1")},
			headerCase{id.header, "!~{}\"'", true, id.is("!~{}\"'")},
			headerCase{id.header, s256, true, id.is(s256)},
			headerCase{id.header, "", true, id.is("")},
			headerCase{id.header, s256 + "i", false, nil},
			headerCase{id.header, "a b", false, nil},
			headerCase{id.header, "a\tb", false, nil},
			headerCase{id.header, "a\nb", false, nil},
			headerCase{id.header, "a\x7f", false, nil},
			headerCase{id.header, "caf\u00e9", false, nil},
		)
	}
	return cases
}

func TestFromMsgHeaderRules(t *testing.T) {
	for _, tc := range headerCases() {
		t.Run(tc.header+"="+tc.value, func(t *testing.T) {
			h := nats.Header{tc.header: []string{tc.value}}
			r, err := records.FromMsg("ea.mbox.k.i", h, nil)
			if tc.ok {
				if err != nil {
					t.Fatalf("FromMsg: %v", err)
				}
				if !tc.check(r) {
					t.Errorf("FromMsg read %+v", r)
				}
				if err := r.Validate(); err != nil {
					t.Errorf("Validate() of the result: %v", err)
				}
				return
			}
			assertFieldError(t, err, tc.header)
			if r.Subject != "" || r.Type != "" {
				t.Errorf("FromMsg returned %+v with an error", r)
			}
		})
	}
}

func assertFieldError(t *testing.T, err error, header string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one about %s", header)
	}
	var fe *records.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *FieldError", err, err)
	}
	if fe.Header != header {
		t.Errorf("FieldError.Header = %q, want %q", fe.Header, header)
	}
	if !errors.Is(err, records.ErrMalformed) {
		t.Errorf("error %v does not match ErrMalformed", err)
	}
	if errors.Is(err, records.ErrPayload) {
		t.Errorf("header error %v matches ErrPayload", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, header) || !strings.Contains(msg, "must be") || !strings.Contains(msg, "(got ") && header != records.HeaderFrom {
		t.Errorf("error %q does not name the header, the rule and what it got", msg)
	}
}

func TestValidate(t *testing.T) {
	valid := records.Record{
		ID:          "01JH5R4Q7Z3W9X2Y8V6T0S1R2Q",
		Type:        "task",
		From:        records.Ref{Kind: "supervisor", ID: "s1"},
		Process:     "orch-1",
		Cause:       "01JH5R4Q7Z3W9X2Y8V6T0S1R2P:0",
		Reply:       "ea.mbox.supervisor.s1",
		Priority:    records.PriorityHigh,
		Time:        time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC),
		ContentType: records.ContentJSON,
		Payload:     []byte(`{}`),
	}
	tests := []struct {
		name   string
		change func(*records.Record)
		header string // "" for valid
	}{
		{"full", func(*records.Record) {}, ""},
		{"zero", func(r *records.Record) { *r = records.Record{} }, ""},
		{"msgpack", func(r *records.Record) { r.ContentType = records.ContentMsgpack }, ""},
		{"local time", func(r *records.Record) { r.Time = time.Now() }, ""},
		{"payload not checked", func(r *records.Record) { r.Payload = []byte("{") }, ""},
		{"bad id", func(r *records.Record) { r.ID = "a b" }, records.HeaderID},
		{"long id", func(r *records.Record) { r.ID = strings.Repeat("i", 257) }, records.HeaderID},
		{"bad type", func(r *records.Record) { r.Type = "a b" }, records.HeaderType},
		{"long type", func(r *records.Record) { r.Type = strings.Repeat("t", 129) }, records.HeaderType},
		{"from without id", func(r *records.Record) { r.From.ID = "" }, records.HeaderFrom},
		{"from without kind", func(r *records.Record) { r.From.Kind = "" }, records.HeaderFrom},
		{"from bad kind", func(r *records.Record) { r.From.Kind = "a/b" }, records.HeaderFrom},
		{"bad process", func(r *records.Record) { r.Process = "\x00" }, records.HeaderProcess},
		{"bad cause", func(r *records.Record) { r.Cause = "x\ny" }, records.HeaderCause},
		{"bad owner", func(r *records.Record) { r.Owner = "a user" }, records.HeaderOwner},
		{"wildcard reply", func(r *records.Record) { r.Reply = "ea.>" }, records.HeaderReply},
		{"empty token reply", func(r *records.Record) { r.Reply = "ea..x" }, records.HeaderReply},
		{"upper-case priority", func(r *records.Record) { r.Priority = "HIGH" }, records.HeaderPriority},
		{"unknown priority", func(r *records.Record) { r.Priority = "low" }, records.HeaderPriority},
		{"year 10000", func(r *records.Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, records.HeaderTime},
		{"year -1", func(r *records.Record) { r.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }, records.HeaderTime},
		{"alias content type", func(r *records.Record) { r.ContentType = "application/x-msgpack" }, records.HeaderContentType},
		{"content type with parameters", func(r *records.Record) { r.ContentType = "application/json; charset=utf-8" }, records.HeaderContentType},
		{"unknown content type", func(r *records.Record) { r.ContentType = "text/plain" }, records.HeaderContentType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid
			tt.change(&r)
			err := r.Validate()
			if tt.header == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			assertFieldError(t, err, tt.header)
		})
	}
}

func TestFromErrorWrapsNameError(t *testing.T) {
	_, err := records.FromMsg("s", nats.Header{records.HeaderFrom: {"a.b/c"}}, nil)
	var ne *records.NameError
	if !errors.As(err, &ne) || ne.What != "kind" || !errors.Is(err, records.ErrInvalidName) || !errors.Is(err, records.ErrMalformed) {
		t.Fatalf("bad EA-From: error %v should be a *FieldError wrapping a *NameError", err)
	}
	want := `malformed record: EA-From "a.b/c": must be <kind>/<id>: invalid effector kind "a.b": must be 1-128 characters of A-Z a-z 0-9 _ - (got '.')`
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
}

func TestFieldErrorMessages(t *testing.T) {
	tests := []struct {
		h    nats.Header
		want string
	}{
		{nats.Header{records.HeaderType: {"a b"}},
			`malformed record: EA-Type "a b": must be 1-128 characters of A-Z a-z 0-9 _ . : / - (got ' ')`},
		{nats.Header{records.HeaderID: {"x y"}},
			`malformed record: Nats-Msg-Id "x y": must be 1-256 printable ASCII characters without spaces (got ' ')`},
		{nats.Header{records.HeaderPriority: {"low"}},
			`malformed record: EA-Priority "low": must be "high" or absent (got "low")`},
		{nats.Header{records.HeaderReply: {"ea.*"}},
			`malformed record: EA-Reply "ea.*": must be a NATS subject of at most 512 bytes: non-empty tokens separated by '.', no whitespace or control characters, no wildcard token * or > (got wildcard token *)`},
		{nats.Header{records.HeaderTime: {"2026-02-30T00:00:00Z"}},
			`malformed record: EA-Time "2026-02-30T00:00:00Z": must be an RFC 3339 time such as 2026-01-02T15:04:05.123456789Z (got day out of range)`},
		{nats.Header{records.HeaderContentType: {"text/plain"}},
			`malformed record: Content-Type "text/plain": must be application/msgpack or application/json (got "text/plain")`},
	}
	for _, tt := range tests {
		_, err := records.FromMsg("s", tt.h, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("error\n%v\nwant\n%s", err, tt.want)
		}
	}
}
