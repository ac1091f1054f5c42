package records

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/codec"
)

func FuzzFromMsg(f *testing.F) {
	mp, err := codec.Marshal(map[string]any{"by": 2, "tags": []string{"a", "b"}})
	if err != nil {
		f.Fatal(err)
	}
	seeds := []struct {
		typ, from, id, prio, tm, ctype, reply string
		data                                  []byte
	}{
		{"inc", "", "", "", "", "application/json", "", []byte(`{"by":2}`)},
		{"inc", "", "", "", "", "", "", []byte(`{"by":2}`)}, // JSON labelled msgpack
		{"task", "supervisor/s1", "01JH5R4Q7Z3W9X2Y8V6T0S1R2Q", "high", "2026-01-02T15:04:05.123456789Z", "application/msgpack", "ea.mbox.supervisor.s1", mp},
		{"", "", "", "", "", "", "", nil},
		{"a.b:c/d-e_f", "k/i", "x:1", "HIGH", "2026-01-02T15:04:05+01:00", "application/x-msgpack", "_INBOX.x", []byte{0xc0}},
		{"t", "k/i/j", "a b", "low", "2026-02-30T00:00:00Z", "text/plain", "ea.*", []byte{0xc1}},
		{"t", "k", "\x00", "high ", "0000-01-01T00:00:00+01:00", "application/json; charset=utf-8", "a..b", []byte(`[1,2`)},
		{"t", "/i", "id", "", "9999-12-31T23:59:59.999999999-00:01", "application/json;", ">", []byte(`"x"`)},
		{strings.Repeat("t", 129), "k/" + strings.Repeat("i", 129), strings.Repeat("i", 257), "", "2026-01-02T15:04:05.1234567891Z", "APPLICATION/JSON", strings.Repeat("a.", 300), []byte(" 1 ")},
		{"t", "k/i", "id", "", "", "", "caf\u00e9.x", []byte{0x91, 0x91, 0x90}},
		{"t", "", "", "", "", "", "", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"t", "", "", "", "", "", "", []byte{0x82, 0xa1, 'a', 0x01}},
		{"t", "", "", "", "", "", "a\r\nb", []byte{0xd8, 0x01}},
		// id doubles as traceparent, reply as tracestate.
		{"t", "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "", "", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", nil},
		{"t", "", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "", "", "", "a b", nil},
	}
	for _, s := range seeds {
		f.Add(s.typ, s.from, s.id, s.prio, s.tm, s.ctype, s.reply, s.data)
	}

	f.Fuzz(func(t *testing.T, typ, from, id, prio, tm, ctype, reply string, data []byte) {
		// EA-Process and EA-Cause reuse inputs: they follow the id rule;
		// traceparent and tracestate reuse id and reply.
		h := make(nats.Header)
		for _, kv := range [...][2]string{
			{HeaderID, id}, {HeaderType, typ}, {HeaderFrom, from}, {HeaderProcess, id},
			{HeaderCause, typ}, {HeaderReply, reply}, {HeaderPriority, prio},
			{HeaderTime, tm}, {HeaderContentType, ctype},
			{HeaderTraceParent, id}, {HeaderTraceState, reply},
		} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		h.Set("X-Other", reply) // headers not ours are ignored

		r, err := FromMsg("ea.mbox.k.i", h, data)

		// Key spelling does not matter, except for Nats-Msg-Id.
		canonical, lower := make(nats.Header), make(nats.Header)
		for k, vs := range h {
			ck, lk := http.CanonicalHeaderKey(k), strings.ToLower(k)
			if k == HeaderID {
				ck, lk = k, k
			}
			canonical[ck], lower[lk] = vs, vs
		}
		for name, h2 := range map[string]nats.Header{"canonical": canonical, "lower": lower} {
			r2, err2 := FromMsg("ea.mbox.k.i", h2, data)
			if errString(err) != errString(err2) || !reflect.DeepEqual(r, r2) {
				t.Fatalf("%s keys: FromMsg = %+v, %v; with exact keys %+v, %v", name, r2, err2, r, err)
			}
		}

		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			var fe *FieldError
			var pe *PayloadError
			if !errors.As(err, &fe) && !errors.As(err, &pe) {
				t.Fatalf("error %v is %T", err, err)
			}
			if !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("FromMsg returned %+v with error %v", r, err)
			}
			return
		}

		if err := r.Validate(); err != nil {
			t.Fatalf("FromMsg accepted %+v, which Validate rejects: %v", r, err)
		}
		if r.Type == "" || r.ContentType == "" || r.Subject != "ea.mbox.k.i" {
			t.Fatalf("FromMsg left defaults unset: %+v", r)
		}
		out := r.Header()
		for k, vs := range out {
			for _, v := range vs {
				if v == "" || strings.ContainsAny(v, "\r\n") || strings.TrimSpace(v) != v {
					t.Fatalf("header %s: %q would not survive the wire", k, v)
				}
			}
		}
		again, err := FromMsg(r.Subject, out, r.Payload)
		if err != nil {
			t.Fatalf("FromMsg of Header() of %+v: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, again)
		}

		// A well-formed payload never makes Decode panic.
		var v any
		_ = r.Decode(&v)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type fuzzPayload struct {
	By   int             `json:"by"`
	Name string          `json:"name"`
	Tags []string        `json:"tags"`
	Sub  *fuzzPayload    `json:"sub"`
	Map  map[string]any  `json:"map"`
	Nums map[string]int  `json:"nums"`
	Time time.Time       `json:"time"`
	F    float32         `json:"f"`
	U    uint8           `json:"u"`
	B    []byte          `json:"b"`
	Arr  [2]int          `json:"arr"`
	Raw  json.RawMessage `json:"raw"`
	Any  any             `json:"any"`
}

func FuzzDecode(f *testing.F) {
	for _, b := range msgpackSamples(f) {
		if len(b) < 1024 {
			f.Add(b, false)
		}
	}
	for _, v := range []any{
		fuzzPayload{By: 1, Name: "n", Tags: []string{"a"}, Sub: &fuzzPayload{By: 2}, Map: map[string]any{"x": 1.5},
			Nums: map[string]int{"a": 1}, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), B: []byte{1}, Any: []any{nil}},
		map[string]any{"by": "not a number"},
		map[string]any{"sub": map[string]any{"sub": map[string]any{"by": -1}}},
	} {
		b, err := codec.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		j, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j, true)
	}
	for _, s := range []string{
		`{"by":2}`, `{"by":"x"}`, `[1,2,3]`, `null`, `"s"`, `{"sub":{"sub":{}}}`, `{"u":300}`,
		`{"arr":[1,2,3]}`, `{"time":"bad"}`, `{"b":"AQ=="}`, `{"by":1e400}`, `{`, `1 2`, "\xff",
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Add([]byte{0x81, 0x01, 0x02}, false)       // int key into map[string]any
	f.Add([]byte{0xd6, 0xff, 0, 0, 0, 1}, false) // timestamp ext
	f.Add([]byte{0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false)
	f.Add([]byte{0xc7, 0x03, 0x05, 1, 2, 3}, false) // unknown ext
	f.Add([]byte{0x81, 0xa3, 's', 'u', 'b', 0xc0}, false)

	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		r := Record{ContentType: ct, Payload: data}

		var s fuzzPayload
		sErr := r.Decode(&s)
		var v any
		vErr := r.Decode(&v)
		for _, err := range []error{sErr, vErr} {
			var pe *PayloadError
			if err != nil && (!errors.As(err, &pe) || pe.ContentType != ct || !errors.Is(err, ErrPayload)) {
				t.Fatalf("Decode error %v (%T) is not a *PayloadError for %s", err, err, ct)
			}
		}

		// Decode and FromMsg agree on what is well formed.
		wellFormed := checkPayload(ct, data) == nil
		if (sErr == nil || vErr == nil) && !wellFormed {
			t.Fatalf("Decode accepted a payload that FromMsg rejects: %v", checkPayload(ct, data))
		}
		if _, err := FromMsg("s", nats.Header{HeaderContentType: {ct}}, data); (err == nil) != wellFormed {
			t.Fatalf("FromMsg = %v, checkPayload well formed = %v", err, wellFormed)
		}
		if asJSON {
			if wellFormed != (len(data) == 0 || json.Valid(data)) {
				t.Fatalf("checkJSON disagrees with json.Valid")
			}
			return
		}
		// checkMsgpack agrees with msgpack's own Skip, where Skip is safe
		// to run (it recurses once per level).
		if len(data) > 0 && len(data) <= MaxDepth {
			if ref := skipOne(data); (ref == nil) != wellFormed {
				t.Fatalf("Skip says %v, checkMsgpack says %v", ref, checkMsgpack(data))
			}
		}
		// A value that decodes encodes again.
		if vErr == nil && len(data) > 0 {
			if _, err := codec.Marshal(v); err != nil {
				t.Fatalf("decoded %#v does not encode: %v", v, err)
			}
		}
	})
}
