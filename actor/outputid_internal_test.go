package actor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/effectors/effectors/records"
)

// An output id is the same every time a record is processed (by any node:
// they share the key), and differs with the key, the effector, the input's
// sequence or id, and the output's number.
func TestOutputIDSigned(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	ctx := func(key []byte, self records.Ref, seq uint64, id string) *Context {
		return newCallContext(nil, &call{ids: newIDSigner(key), self: self, rec: records.Record{ID: id, Seq: seq}})
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	base := ctx(key, c1, 7, "in-1").outputID("0")
	if again := ctx(key, c1, 7, "in-1").outputID("0"); again != base {
		t.Errorf("output id not stable: %s then %s", base, again)
	}
	if !strings.HasPrefix(base, "in-1:0.") || len(base) != len("in-1:0.")+20 {
		t.Errorf("output id %s, want in-1:0.<20 hex digits>", base)
	}
	for name, other := range map[string]string{
		"key":    ctx([]byte(strings.Repeat("x", 32)), c1, 7, "in-1").outputID("0"),
		"self":   ctx(key, records.Ref{Kind: "counter", ID: "c2"}, 7, "in-1").outputID("0"),
		"seq":    ctx(key, c1, 8, "in-1").outputID("0"),
		"id":     ctx(key, c1, 7, "in-2").outputID("0"),
		"n":      ctx(key, c1, 7, "in-1").outputID("1"),
		"no key": ctx(nil, c1, 7, "in-1").outputID("0"),
	} {
		if other == base || (name != "id" && name != "n" && strings.TrimPrefix(other, "in-1:0") == strings.TrimPrefix(base, "in-1:0")) {
			t.Errorf("another %s gives %s, the same tag as %s", name, other, base)
		}
	}
	if got := ctx(nil, c1, 7, "in-1").outputID("0"); got != "in-1:0" {
		t.Errorf("unsigned output id %s, want in-1:0 (Kind.Apply)", got)
	}
	long := strings.Repeat("a", records.MaxIDLen)
	if id := ctx(key, c1, 7, long).outputID("12"); len(id) > records.MaxIDLen || (records.Record{ID: id, Type: "x"}).Validate() != nil {
		t.Errorf("output id of a %d-character input id: %q (%d characters, %v)", len(long), id, len(id), (records.Record{ID: id, Type: "x"}).Validate())
	}
}

// The node's signer reuses keyed hashes: every tag it gives, however often
// a pooled hash was used before, is the tag of a fresh HMAC with the key,
// written part by part with a zero byte after each (the id format since
// output ids were signed; changing it would publish every redelivered
// record's outputs again under new ids).
func TestIDSignerMatchesFreshHMAC(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", 32))
	s := newIDSigner(key)
	fresh := func(self records.Ref, seq uint64, id, n string) string {
		m := hmac.New(sha256.New, key)
		for _, part := range []string{"ea-output-id", self.Kind, self.ID, strconv.FormatUint(seq, 10), id, n} {
			m.Write([]byte(part))
			m.Write([]byte{0})
		}
		return hex.EncodeToString(m.Sum(nil)[:10])
	}
	long := strings.Repeat("i", records.MaxIDLen)
	for round := range 3 {
		for i, c := range []struct {
			self  records.Ref
			seq   uint64
			id, n string
		}{
			{records.Ref{Kind: "counter", ID: "c1"}, 7, "in-1", "0"},
			{records.Ref{Kind: "counter", ID: "c2"}, 1 << 40, long, "12"},
			{records.Ref{Kind: strings.Repeat("k", 64), ID: long}, 0, long, "s3"},
		} {
			if got, want := s.tag(c.self, c.seq, c.id, c.n), fresh(c.self, c.seq, c.id, c.n); got != want {
				t.Fatalf("round %d, case %d: signer %s, fresh HMAC %s", round, i, got, want)
			}
		}
	}
	if newIDSigner(nil) != nil {
		t.Fatal("a signer without a key")
	}
}

// BenchmarkOutputTag: signing one output id with a fresh HMAC per output
// (fresh) against the node's pooled keyed hashes (pooled).
func BenchmarkOutputTag(b *testing.B) {
	key := []byte(strings.Repeat("k", 32))
	self := records.Ref{Kind: "counter", ID: "c1"}
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = idTag(key, self, 12345, "0KQ3J5X9Z8W7V6T5S4R3P2N1M0", "0")
		}
	})
	s := newIDSigner(key)
	b.Run("pooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.tag(self, 12345, "0KQ3J5X9Z8W7V6T5S4R3P2N1M0", "0")
		}
	})
}
