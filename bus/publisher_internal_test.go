package bus

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

var ackSamples = []string{
	`{"stream":"S","seq":1}`,
	`{"stream":"EA_OUT_2_OF_3","seq":18446744073709551615,"duplicate":true}`,
	`{"stream":"S","domain":"hub","seq":5}`,
	`{"seq":5,"stream":"S","duplicate":false}`,
	`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}`,
	`{"stream":"S","seq":1,"val":"10"}`,
	`{"stream":"S\"x","seq":1}`,
	`{"stream":"S","seq":-1}`,
	`{"stream":"S","seq":1,}`,
	`{"stream":"S" ,"seq":1}`,
	`{"stream":"","seq":1}`,
	`{"stream":"S"}`,
	`{}`, `{`, ``, `null`, `[1]`, `{"stream":"S","seq":1}x`,
}

// TestParseAck checks the hand-written reading against encoding/json, and
// that a refusal is the server's APIError.
func TestParseAck(t *testing.T) {
	for _, s := range ackSamples {
		checkParseAck(t, []byte(s))
	}
	_, err := parseAck([]byte(ackSamples[4]))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10071 {
		t.Errorf("a refusal: err = %v, want APIError 10071", err)
	}
	if _, err := parseAck([]byte(`{`)); !errors.Is(err, jetstream.ErrInvalidJSAck) {
		t.Errorf("not JSON: err = %v, want ErrInvalidJSAck", err)
	}
}

// FuzzParseAck: whatever quickAck accepts, encoding/json reads the same.
func FuzzParseAck(f *testing.F) {
	for _, s := range ackSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParseAck)
}

func checkParseAck(t *testing.T, data []byte) {
	ack, ok := quickAck(data)
	if !ok {
		return
	}
	var want struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &want); err != nil || want.Error != nil || want.PubAck == nil {
		t.Fatalf("quickAck read %q as %+v; encoding/json: %v, %+v", data, ack, err, want)
	}
	if *ack != *want.PubAck {
		t.Fatalf("quickAck read %q as %+v; encoding/json as %+v", data, ack, want.PubAck)
	}
}
