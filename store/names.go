package store

import (
	"crypto/sha256"
	"encoding/base64"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// names are the store's own subjects and streams, derived from [bus.Names].
type names struct {
	bus.Names
	// The record log's streams (one of each, or one per stream group),
	// listed once: queries ask per record which one a record is in.
	mboxStreams, outStreams []string
}

func newNames(n bus.Names) names {
	return names{Names: n, mboxStreams: n.MailboxStreams(), outStreams: n.OutboxStreams()}
}

// Index kinds: each has its own stream, so that reading one process's
// entries walks only process entries.
const (
	indexProcess = "proc"
	indexType    = "type"
	indexID      = "id"
	indexOwner   = "owner"
)

// indexFilter is the subject filter of the index stream of kind:
// <prefix>.idx.<kind>.>.
func (n names) indexFilter(kind string) string { return n.IndexFilter(kind) }

// processShards is how many streams the process index is spread over, by
// a hash of the process: reading one process walks the entries of its
// shard only (see doc.go).
const processShards = 16

// processShard is the shard of process: FNV-1a modulo processShards.
func processShard(process string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(process))
	return int(h.Sum32() % processShards)
}

// processStream is the stream of shard: <PREFIX>_IDX_PROC_<shard>.
func (n names) processStream(shard int) string {
	return n.IndexStream(indexProcess) + "_" + strconv.Itoa(shard)
}

// processIndex is <prefix>.idx.proc.<shard>.<token(process)>, in stream
// processStream(shard).
func (n names) processIndex(process string) (stream, subject string) {
	shard := processShard(process)
	return n.processStream(shard), n.Index(indexProcess, strconv.Itoa(shard), token(process))
}

// processFilter is the subject filter of shard: <prefix>.idx.proc.<shard>.>.
func (n names) processFilter(shard int) string {
	return n.IndexFilter(indexProcess, strconv.Itoa(shard))
}

// ownerShards is how many streams the owner index is spread over, by a
// hash of the owner (as the process index).
const ownerShards = 4

// ownerStream is the stream of shard: <PREFIX>_IDX_OWNER_<shard>.
func (n names) ownerStream(shard int) string {
	return n.IndexStream(indexOwner) + "_" + strconv.Itoa(shard)
}

// ownerIndex is <prefix>.idx.owner.<shard>.<token(owner)>, in stream
// ownerStream(shard).
func (n names) ownerIndex(owner string) (stream, subject string) {
	shard := processShard(owner) % ownerShards
	return n.ownerStream(shard), n.Prefix() + ".idx.owner." + strconv.Itoa(shard) + "." + token(owner)
}

// ownerFilter is the subject filter of shard: <prefix>.idx.owner.<shard>.>.
func (n names) ownerFilter(shard int) string {
	return n.Prefix() + ".idx.owner." + strconv.Itoa(shard) + ".>"
}

// typeIndex is <prefix>.idx.type.<token(type)>.
func (n names) typeIndex(typ string) string { return n.Index(indexType, token(typ)) }

// idIndex is <prefix>.idx.id.<token(id)>: one subject per record id, so a
// lookup is JetStream's per-subject index, whatever the size of the log.
func (n names) idIndex(id string) string { return n.Index(indexID, token(id)) }

// outboxes and mailboxes are the stored subject filters of every outbox and
// every mailbox.
func (n names) outboxes() string  { return n.Outboxes() }
func (n names) mailboxes() string { return n.Mailboxes() }

// logStreams are the streams of the record log, the mailbox streams then
// the outbox streams: one of each with one stream group, one per group of
// each with several (docs/layout.md).
func (n names) logStreams() []string {
	return append(slices.Clone(n.mboxStreams), n.outStreams...)
}

// isMailboxStream reports whether stream is one of the mailbox streams.
func (n names) isMailboxStream(stream string) bool { return slices.Contains(n.mboxStreams, stream) }

// isLogStream reports whether stream is one of the record log's streams.
func (n names) isLogStream(stream string) bool {
	return n.isMailboxStream(stream) || slices.Contains(n.outStreams, stream)
}

// subject is the service endpoint subject <prefix>.store.<op>.
func (n names) subject(op string) string { return n.Store(op) }

// service is the micro service name: <prefix>_store.
func (n names) service() string { return n.StoreService() }

// maxValue is the longest value (record id, type, process, owner) the
// index keeps as it is: the longest a valid record carries
// ([records.MaxIDLen]). Only a record that fails validation carries a longer
// one, and the index keeps its digest instead (see [bounded]).
const maxValue = records.MaxIDLen

// token makes s (printable ASCII, as record ids, process ids and types are)
// one subject token of at most 344 bytes, whatever the length of s: s itself
// when it is at most 256 bytes of A-Z a-z 0-9 _ - : and does not start with
// '~'; otherwise, up to 256 bytes, '~' and s in unpadded base64url; past 256
// bytes, its digest (see [bounded]). Distinct strings give distinct tokens.
//
// The bound matters: a subject longer than the server's maximum control
// line (4 KiB by default) makes the server close the publisher's connection
// for good, so a token built from a hostile header would take the indexer's
// connection, and the node's, down with it.
func token(s string) string {
	if len(s) > maxValue {
		return bounded(s)
	}
	plain := s != "" && s[0] != '~'
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':'
	}
	if plain {
		return s
	}
	return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// bounded is s when it is at most maxValue bytes long, else "~~" and the
// SHA-256 of s in unpadded base64url (45 bytes): what an index subject and
// an index entry hold for a value no valid record carries. The "~~" cannot
// start a base64url form, so a digest never equals another value's token.
func bounded(s string) string {
	if len(s) <= maxValue {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "~~" + base64.RawURLEncoding.EncodeToString(sum[:])
}
