package store

import (
	"encoding/base64"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/effectors/effectors/bus"
)

// idBuckets is how many subjects the record-id index spreads ids over: a
// lookup reads the entries of one bucket, about log size / idBuckets.
const idBuckets = 1 << 16

// names are the store's own subjects and streams, derived from [bus.Names].
type names struct {
	bus.Names
}

// IndexStream is the index stream: <PREFIX>_IDX.
func (n names) IndexStream() string {
	return strings.TrimSuffix(n.MailboxStream(), "_MBOX") + "_IDX"
}

// indexAll is the subject filter of the index stream: <prefix>.idx.>.
func (n names) indexAll() string { return n.Prefix() + ".idx.>" }

// processIndex is <prefix>.idx.proc.<token(process)>.
func (n names) processIndex(process string) string {
	return n.Prefix() + ".idx.proc." + token(process)
}

// typeIndex is <prefix>.idx.type.<token(type)>.
func (n names) typeIndex(typ string) string { return n.Prefix() + ".idx.type." + token(typ) }

// idIndex is <prefix>.idx.id.<bucket of id>, bucket a 4-digit hex FNV-1a hash.
func (n names) idIndex(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	b := strconv.FormatUint(uint64(h.Sum32()%idBuckets), 16)
	return n.Prefix() + ".idx.id." + strings.Repeat("0", 4-len(b)) + b
}

// outboxes and mailboxes are the stored subject filters of every outbox and
// every mailbox.
func (n names) outboxes() string  { return n.Prefix() + ".out.>" }
func (n names) mailboxes() string { return n.Prefix() + ".mbox.>" }

// subject is the service endpoint subject <prefix>.store.<op>.
func (n names) subject(op string) string { return n.Prefix() + ".store." + op }

// service is the micro service name: <prefix>_store.
func (n names) service() string { return n.Prefix() + "_store" }

// token makes s (printable ASCII, as record ids, process ids and types are)
// one subject token: s itself when it is made of A-Z a-z 0-9 _ - : and does
// not start with '~'; otherwise '~' and s in unpadded base64url. Distinct
// strings give distinct tokens.
func token(s string) string {
	plain := s != "" && s[0] != '~' && len(s) <= 200
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':'
	}
	if plain {
		return s
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
}
