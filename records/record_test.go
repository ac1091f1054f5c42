package records_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/records"
)

type inc struct {
	By int `json:"by"`
}

func TestRoundTrip(t *testing.T) {
	payload, err := codec.Marshal(map[string]any{"by": 2})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   records.Record
		want records.Record // what FromMsg reads; Subject is added by the test
	}{
		{
			name: "full",
			in: records.Record{
				ID:          "01JH5R4Q7Z3W9X2Y8V6T0S1R2Q",
				Type:        "task",
				From:        records.Ref{Kind: "supervisor", ID: "s1"},
				Process:     "orch-1",
				Owner:       "user-42",
				Cause:       "01JH5R4Q7Z3W9X2Y8V6T0S1R2P:0",
				Reply:       "ea.mbox.supervisor.s1",
				Priority:    records.PriorityHigh,
				Time:        time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC),
				ContentType: records.ContentMsgpack,
				Payload:     payload,
			},
		},
		{
			name: "json",
			in: records.Record{
				ID:          "x",
				Type:        "inc",
				ContentType: records.ContentJSON,
				Payload:     []byte(`{"by":2}`),
			},
		},
		{
			name: "minimal",
			in:   records.Record{},
			want: records.Record{Type: records.DefaultType, ContentType: records.ContentMsgpack},
		},
		{
			name: "time in another zone",
			in:   records.Record{Type: "t", Time: time.Date(2026, 1, 2, 15, 4, 5, 1, time.FixedZone("X", 3600)), ContentType: records.ContentMsgpack},
			want: records.Record{Type: "t", Time: time.Date(2026, 1, 2, 14, 4, 5, 1, time.UTC), ContentType: records.ContentMsgpack},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.in.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			want := tt.want
			if reflect.DeepEqual(want, records.Record{}) {
				want = tt.in
			}
			want.Subject = "ea.mbox.k.i"

			m := tt.in.Msg("ea.mbox.k.i")
			got, err := records.FromMsg(m.Subject, m.Header, m.Data)
			if err != nil {
				t.Fatalf("FromMsg: %v", err)
			}
			assertEqualRecords(t, got, want)

			// And once more through the result.
			again, err := records.FromMsg(got.Subject, got.Header(), got.Payload)
			if err != nil {
				t.Fatalf("second FromMsg: %v", err)
			}
			assertEqualRecords(t, again, want)
		})
	}
}

func assertEqualRecords(t *testing.T, got, want records.Record) {
	t.Helper()
	if !reflect.DeepEqual(got.Payload, want.Payload) && !(len(got.Payload) == 0 && len(want.Payload) == 0) {
		t.Errorf("Payload = %x, want %x", got.Payload, want.Payload)
	}
	got.Payload, want.Payload = nil, nil
	if !got.Time.Equal(want.Time) {
		t.Errorf("Time = %v, want %v", got.Time, want.Time)
	}
	got.Time, want.Time = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromMsg read\n%+v\nwant\n%+v", got, want)
	}
}

func TestHeader(t *testing.T) {
	r := records.Record{
		ID:       "id1",
		Type:     "task",
		From:     records.Ref{Kind: "k", ID: "i"},
		Process:  "p",
		Cause:    "c",
		Reply:    "r.s",
		Priority: records.PriorityHigh,
		Time:     time.Date(2026, 1, 2, 15, 4, 5, 120000000, time.FixedZone("X", -7200)),
		Payload:  []byte{0x01},
	}
	want := nats.Header{
		"Nats-Msg-Id":  {"id1"},
		"EA-Type":      {"task"},
		"EA-From":      {"k/i"},
		"EA-Process":   {"p"},
		"EA-Cause":     {"c"},
		"EA-Reply":     {"r.s"},
		"EA-Priority":  {"high"},
		"EA-Time":      {"2026-01-02T17:04:05.12Z"},
		"Content-Type": {"application/msgpack"},
	}
	if got := r.Header(); !reflect.DeepEqual(got, want) {
		t.Errorf("Header() =\n%v\nwant\n%v", got, want)
	}
	if got := (records.Record{}).Header(); !reflect.DeepEqual(got, nats.Header{"Content-Type": {"application/msgpack"}}) {
		t.Errorf("Header() of the zero Record = %v", got)
	}
	m := r.Msg("ea.mbox.k.i")
	if m.Subject != "ea.mbox.k.i" || !bytes.Equal(m.Data, r.Payload) || m.Reply != "" || m.Header.Get("EA-Type") != "task" {
		t.Errorf("Msg() = %+v", m)
	}
}

// A message as a plain client (the nats CLI, another language) sends it.
func TestFromMsgPlainClient(t *testing.T) {
	h := nats.Header{}
	h.Set("EA-Type", "inc")
	h.Set("Content-Type", "application/json")
	r, err := records.FromMsg("ea.mbox.counter.c1", h, []byte(`{"by":2}`))
	if err != nil {
		t.Fatalf("FromMsg: %v", err)
	}
	want := records.Record{
		Type:        "inc",
		ContentType: records.ContentJSON,
		Payload:     []byte(`{"by":2}`),
		Subject:     "ea.mbox.counter.c1",
	}
	assertEqualRecords(t, r, want)
	var v inc
	if err := r.Decode(&v); err != nil || v.By != 2 {
		t.Fatalf("Decode = %+v, %v", v, err)
	}
}

func TestFromMsgHeaderKeyCase(t *testing.T) {
	exact := nats.Header{
		"Nats-Msg-Id":  {"id1"},
		"EA-Type":      {"inc"},
		"EA-From":      {"k/i"},
		"EA-Process":   {"p"},
		"EA-Cause":     {"c"},
		"EA-Reply":     {"r.s"},
		"EA-Priority":  {"high"},
		"EA-Time":      {"2026-01-02T15:04:05Z"},
		"Content-Type": {"application/json"},
	}
	want, err := records.FromMsg("s", exact, []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	canonical := nats.Header{}
	lower := nats.Header{}
	upper := nats.Header{}
	for k, vs := range exact {
		for _, v := range vs {
			http.Header(canonical).Add(k, v) // "Ea-Type", as net/http-style clients send it
			lower.Add(strings.ToLower(k), v)
			upper.Add(strings.ToUpper(k), v)
		}
	}
	if _, ok := canonical["Ea-Type"]; !ok {
		t.Fatalf("canonical keys are %v", canonical)
	}
	lower["Nats-Msg-Id"] = exact["Nats-Msg-Id"]
	upper["Nats-Msg-Id"] = exact["Nats-Msg-Id"]
	for name, h := range map[string]nats.Header{"canonical": canonical, "lower": lower, "upper": upper} {
		got, err := records.FromMsg("s", h, []byte("1"))
		if err != nil {
			t.Fatalf("%s keys: %v", name, err)
		}
		assertEqualRecords(t, got, want)
	}

	// Nats-Msg-Id is read only as JetStream spells it.
	r, err := records.FromMsg("s", nats.Header{"nats-msg-id": {"x"}, "NATS-MSG-ID": {"y"}}, nil)
	if err != nil || r.ID != "" {
		t.Errorf("nats-msg-id read as ID %q, %v", r.ID, err)
	}

	// The exact spelling wins; otherwise the spelling that sorts first.
	r, err = records.FromMsg("s", nats.Header{"ea-type": {"a"}, "EA-Type": {"b"}, "Ea-Type": {"c"}}, nil)
	if err != nil || r.Type != "b" {
		t.Errorf("Type = %q, %v; want the exact key's b", r.Type, err)
	}
	for range 20 { // map order is random: the choice must not be
		r, err = records.FromMsg("s", nats.Header{"ea-type": {"a"}, "EA-TYPE": {"b"}, "Ea-Type": {"c"}, "eA-tYpE": {"d"}}, nil)
		if err != nil || r.Type != "b" {
			t.Fatalf("Type = %q, %v; want b from EA-TYPE", r.Type, err)
		}
	}
}

func TestFromMsgOddHeaders(t *testing.T) {
	tests := []struct {
		name string
		h    nats.Header
		want records.Record
	}{
		{"nil", nil, records.Record{Type: records.DefaultType}},
		{"empty", nats.Header{}, records.Record{Type: records.DefaultType}},
		// nats.Header.Get panics on this one.
		{"no values", nats.Header{"EA-Type": {}, "Nats-Msg-Id": {}, "Ea-From": {}}, records.Record{Type: records.DefaultType}},
		{"nil values", nats.Header{"EA-Type": nil}, records.Record{Type: records.DefaultType}},
		{"empty values", nats.Header{"EA-Type": {""}, "EA-Time": {""}, "Content-Type": {""}}, records.Record{Type: records.DefaultType}},
		{"several values", nats.Header{"EA-Type": {"a", "b c"}, "EA-Priority": {"high", "bad"}}, records.Record{Type: "a", Priority: records.PriorityHigh}},
		{"unrelated headers", nats.Header{"X-Trace": {"\r\n"}, "EA-Error": {"boom"}, "Nats-Sequence": {"x"}}, records.Record{Type: records.DefaultType}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := records.FromMsg("s", tt.h, nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Subject = "s"
			tt.want.ContentType = records.ContentMsgpack
			assertEqualRecords(t, got, tt.want)
		})
	}
}

func TestFromMsgPayload(t *testing.T) {
	mp := func(v any) []byte {
		b, err := codec.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	deep := func(n int, open, close string) []byte {
		return []byte(strings.Repeat(open, n) + strings.Repeat(close, n))
	}
	tests := []struct {
		name  string
		ctype string
		data  []byte
		ok    bool
	}{
		{"msgpack empty", records.ContentMsgpack, nil, true},
		{"msgpack map", records.ContentMsgpack, mp(map[string]any{"by": 2, "tags": []string{"a"}}), true},
		{"msgpack scalar", records.ContentMsgpack, mp(1.5), true},
		{"msgpack nil", records.ContentMsgpack, []byte{0xc0}, true},
		{"msgpack absent content type", "", mp("x"), true},
		{"msgpack alias", "application/x-msgpack", mp("x"), true},
		{"msgpack deep ok", records.ContentMsgpack, append(bytes.Repeat([]byte{0x91}, records.MaxDepth-1), 0x90), true},
		{"json empty", records.ContentJSON, []byte{}, true},
		{"json object", records.ContentJSON, []byte(`{"by":2}`), true},
		{"json scalar", records.ContentJSON, []byte(` 2 `), true},

		// '{' is 0x7b, a positive fixint: one value then 7 trailing bytes.
		{"json labelled msgpack", records.ContentMsgpack, []byte(`{"by":2}`), false},
		{"json labelled msgpack by default", "", []byte(`{"by":2}`), false},
		{"msgpack two values", records.ContentMsgpack, []byte{0x01, 0x02}, false},
		{"msgpack truncated map", records.ContentMsgpack, mp(map[string]any{"by": 2})[:3], false},
		{"msgpack truncated str", records.ContentMsgpack, []byte{0xa5, 'a'}, false},
		{"msgpack huge str32", records.ContentMsgpack, []byte{0xdb, 0xff, 0xff, 0xff, 0xff}, false},
		{"msgpack huge array32", records.ContentMsgpack, []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x00}, false},
		{"msgpack reserved code", records.ContentMsgpack, []byte{0xc1}, false},
		{"msgpack too deep", records.ContentMsgpack, append(bytes.Repeat([]byte{0x91}, records.MaxDepth), 0x90), false},
		{"msgpack labelled json", records.ContentJSON, mp(map[string]any{"by": 2}), false},
		{"json truncated", records.ContentJSON, []byte(`{"by":`), false},
		{"json two values", records.ContentJSON, []byte(`1 2`), false},
		{"json text", records.ContentJSON, []byte(`hello`), false},
		{"json deep", records.ContentJSON, deep(100000, "[", "]"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			if tt.ctype != "" {
				h.Set(records.HeaderContentType, tt.ctype)
			}
			r, err := records.FromMsg("s", h, tt.data)
			if tt.ok {
				if err != nil {
					t.Fatalf("FromMsg: %v", err)
				}
				if !bytes.Equal(r.Payload, tt.data) {
					t.Errorf("Payload = %x", r.Payload)
				}
				return
			}
			var pe *records.PayloadError
			if !errors.As(err, &pe) || !errors.Is(err, records.ErrPayload) || !errors.Is(err, records.ErrMalformed) {
				t.Fatalf("FromMsg = %v, want a *PayloadError matching ErrPayload and ErrMalformed", err)
			}
			if !strings.HasPrefix(err.Error(), "invalid "+pe.ContentType+" payload: ") {
				t.Errorf("error %q does not name the content type", err)
			}
		})
	}
}

func TestFromMsgJSONLabelledMsgpackMessage(t *testing.T) {
	_, err := records.FromMsg("s", nats.Header{"EA-Type": {"inc"}}, []byte(`{"by":2}`))
	want := "invalid application/msgpack payload: msgpack: 7 trailing bytes after the value at offset 1"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestNew(t *testing.T) {
	before := time.Now()
	r, err := records.New("inc", inc{By: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != "inc" || r.ContentType != records.ContentMsgpack || len(r.ID) != records.IDLen {
		t.Errorf("New() = %+v", r)
	}
	if r.Time.Before(before.Add(-time.Second)) || r.Time.After(time.Now().Add(time.Second)) || r.Time.Location() != time.UTC {
		t.Errorf("Time = %v", r.Time)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	var m map[string]any
	if err := codec.Unmarshal(r.Payload, &m); err != nil || len(m) != 1 || m["by"] != int8(2) {
		t.Errorf("payload %x decodes to %#v, %v", r.Payload, m, err)
	}

	j, err := records.NewJSON("inc", inc{By: 2})
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Payload) != `{"by":2}` || j.ContentType != records.ContentJSON || j.ID == r.ID {
		t.Errorf("NewJSON() = %+v", j)
	}

	for _, newRecord := range []func(string, any) (records.Record, error){records.New, records.NewJSON} {
		r, err := newRecord("", nil)
		if err != nil || r.Type != records.DefaultType || len(r.Payload) != 0 {
			t.Errorf("New(\"\", nil) = %+v, %v", r, err)
		}
		if _, err := newRecord("a b", nil); !errors.Is(err, records.ErrMalformed) {
			t.Errorf("bad type: %v", err)
		}
		if _, err := newRecord("t", make(chan int)); err == nil {
			t.Error("unencodable payload: no error")
		}
	}
	if _, err := records.NewJSON("t", math.Inf(1)); err == nil || !strings.Contains(err.Error(), "application/json") {
		t.Errorf("NewJSON(+Inf) = %v", err)
	}
}

func TestDecode(t *testing.T) {
	mp, err := records.New("inc", map[string]any{"by": 2, "x": []any{"a", 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	js, err := records.NewJSON("inc", map[string]any{"by": 2})
	if err != nil {
		t.Fatal(err)
	}

	var s inc
	if err := mp.Decode(&s); err != nil || s.By != 2 {
		t.Errorf("msgpack into struct: %+v, %v", s, err)
	}
	s = inc{}
	if err := js.Decode(&s); err != nil || s.By != 2 {
		t.Errorf("json into struct: %+v, %v", s, err)
	}
	var a any
	if err := mp.Decode(&a); err != nil {
		t.Errorf("msgpack into any: %v", err)
	} else if _, err := json.Marshal(a); err != nil {
		t.Errorf("msgpack map does not convert to JSON: %#v: %v", a, err)
	}

	// Empty payload: v untouched.
	s = inc{By: 7}
	for _, ct := range []string{"", records.ContentMsgpack, records.ContentJSON, "bogus"} {
		if err := (records.Record{ContentType: ct}).Decode(&s); err != nil || s.By != 7 {
			t.Errorf("empty %q payload: %+v, %v", ct, s, err)
		}
	}

	bad := []struct {
		name  string
		r     records.Record
		ctype string // PayloadError.ContentType
	}{
		{"wrong type msgpack", records.Record{Payload: mustMarshal(t, map[string]any{"by": "x"})}, records.ContentMsgpack},
		{"wrong type json", records.Record{ContentType: records.ContentJSON, Payload: []byte(`{"by":"x"}`)}, records.ContentJSON},
		{"json labelled msgpack", records.Record{Payload: []byte(`{"by":2}`)}, records.ContentMsgpack},
		{"truncated msgpack", records.Record{Payload: []byte{0x81, 0xa2}}, records.ContentMsgpack},
		{"too deep msgpack", records.Record{Payload: append(bytes.Repeat([]byte{0x91}, 1<<20), 0xc0)}, records.ContentMsgpack},
		{"bad json", records.Record{ContentType: records.ContentJSON, Payload: []byte(`{`)}, records.ContentJSON},
		{"unknown content type", records.Record{ContentType: "text/plain", Payload: []byte(`x`)}, "text/plain"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var s inc
			err := tt.r.Decode(&s)
			var pe *records.PayloadError
			if !errors.As(err, &pe) || !errors.Is(err, records.ErrPayload) || !errors.Is(err, records.ErrMalformed) {
				t.Fatalf("Decode = %v, want a *PayloadError", err)
			}
			if pe.ContentType != tt.ctype || !strings.Contains(err.Error(), tt.ctype) {
				t.Errorf("error %q: want content type %s", err, tt.ctype)
			}
		})
	}

	// Not a pointer.
	if err := mp.Decode(inc{}); !errors.Is(err, records.ErrPayload) {
		t.Errorf("Decode(non-pointer) = %v", err)
	}
	if err := js.Decode(nil); !errors.Is(err, records.ErrPayload) {
		t.Errorf("Decode(nil) = %v", err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := codec.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
