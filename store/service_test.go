package store_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/effectors/effectors/store"
)

func request(t *testing.T, e *env, op, body string) (data []byte, code, kind string) {
	t.Helper()
	msg, err := e.conn.NATS().Request("ea.store."+op, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	kind = msg.Header.Get("Ea-Store-Error")
	if reason := msg.Header.Get("EA-Error-Reason"); reason != kind {
		t.Errorf("%s: EA-Error-Reason %q, Ea-Store-Error %q: want the same kind in both", op, reason, kind)
	}
	return msg.Data, msg.Header.Get("Nats-Service-Error-Code"), kind
}

func TestService(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rs := fixture(t, e)
	want := ids(rs, func(r rec) bool { return r.subject == "ea.mbox.w.2" })

	// Page through one effector's mailbox over NATS.
	var got []string
	cursor := ""
	for {
		req, _ := json.Marshal(store.QueryRequest{Effector: "w/2", Box: store.BoxMailbox, Limit: 3, Cursor: cursor})
		data, code, _ := request(t, e, "query", string(req))
		if code != "" {
			t.Fatalf("query: %s %s", code, data)
		}
		var p store.PageJSON
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			got = append(got, r.ID)
			if r.Effector != "w/2" || r.Box != store.BoxMailbox || r.Subject != "ea.mbox.w.2" || string(r.JSON) != `{"id":"`+r.ID+`"}` {
				t.Fatalf("record %+v", r)
			}
		}
		if !p.More {
			break
		}
		cursor = p.Cursor
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}

	data, code, _ := request(t, e, "get", `{"id":"r05"}`)
	var r store.RecordJSON
	if err := json.Unmarshal(data, &r); code != "" || err != nil || r.ID != "r05" || r.Type != "task" || r.Process != "p1" {
		t.Fatalf("get: %s %s %v", code, data, err)
	}
	data, code, _ = request(t, e, "count", `{"process":"p0"}`)
	if string(data) != `{"count":21}` || code != "" {
		t.Fatalf("count: %s %s", code, data)
	}

	for _, tt := range []struct{ op, body, code, kind string }{
		{"query", `{"limit":5000}`, "400", "page_too_large"},
		{"query", `{"cursor":"nope"}`, "400", "bad_cursor"},
		{"query", `{"proces":"p0"}`, "400", "invalid"},
		{"query", `{"process":"p0"} {}`, "400", "invalid"},
		{"query", `{"effector":"w"}`, "400", "invalid"},
		{"query", `[1]`, "400", "invalid"},
		{"get", `{"id":"nothing"}`, "404", "not_found"},
		{"get", `{}`, "400", "invalid"},
		{"effectors", `{"kind":"ghost"}`, "400", "unknown_kind"},
		{"effectors", `{"kind":"w","status":"SLEEPING"}`, "400", "invalid"},
		{"kinds", `{"x":1}`, "400", "invalid"},
	} {
		data, code, kind := request(t, e, tt.op, tt.body)
		if code != tt.code || kind != tt.kind {
			t.Errorf("%s %s: got %q %q (%s), want %s %s", tt.op, tt.body, code, kind, data, tt.code, tt.kind)
		}
	}
}

func FuzzDecodeQueryRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"process":"p","limit":10}`, `{"effector":"a/b","box":"mailbox","order":"newest"}`,
		`{"since":"2026-01-02T15:04:05Z","until":"2026-01-02T15:04:06Z"}`, `{"limit":1001}`, `{"cursor":"eyJ2IjoxfQ"}`, `{"x":1}`, `{"type":"a b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := store.DecodeQueryRequest(data)
		if err != nil {
			if !errorsIsInvalid(err) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		if q.Limit > store.MaxLimit || q.Limit < 0 {
			t.Fatalf("accepted limit %d", q.Limit)
		}
		if !q.Effector.IsZero() && q.Effector.Validate() != nil {
			t.Fatalf("accepted effector %v", q.Effector)
		}
	})
}
