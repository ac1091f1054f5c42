package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store is typed, msgpack-encoded state in one JetStream KV bucket. Safe for
// concurrent use.
//
// Values are encoded with the module's msgpack codec (struct fields named by
// their json tags), so any language can read them as maps.
type Store[T any] struct {
	kv     jetstream.KeyValue
	bucket string
	typ    string   // T's name, for DecodeError
	turns  keyTurns // Modify calls on one key take turns
	opts   options
}

// Entry is one revision of a key.
type Entry[T any] struct {
	// Key is the key, never a pattern.
	Key string
	// Value is the decoded value; the zero T when Deleted.
	Value T
	// Revision is the bucket-wide sequence number of this write; it grows
	// with every write to any key of the bucket. Pass it to [Store.Update].
	Revision uint64
	// Created is when the server stored this revision. It is zero in the
	// entry [Store.Modify] returns, since a write does not report it.
	Created time.Time
	// Deleted marks a delete or purge marker (only [Store.Watch] and
	// [Store.History] return those).
	Deleted bool
}

// maxModifyAttempts bounds the read-modify-write loop of [Store.Modify].
const maxModifyAttempts = 16

// New returns a store over an existing bucket handle, which must not be nil.
func New[T any](b jetstream.KeyValue, opts ...Option) *Store[T] {
	s := &Store[T]{kv: b, bucket: b.Bucket(), typ: reflect.TypeFor[T]().String()}
	for _, o := range opts {
		o(&s.opts)
	}
	return s
}

// Option configures a [Store].
type Option func(*options)

type options struct {
	pub Publisher // nil: the bucket's own Update
}

// Publisher publishes a message to a stream and waits for the server's
// acknowledgement, as bus.Publisher does.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error)
}

// WithPublisher makes [Store.Update] write through p: a message to the
// bucket's subject $KV.<bucket>.<key> that expects the key's last revision,
// what the bucket's own Update sends, at p's cost. Use it only for a bucket
// reached without a JetStream domain or API prefix, and not a mirror.
func WithPublisher(p Publisher) Option {
	return func(o *options) { o.pub = p }
}

// Open returns a store over the bucket named bucket, which must exist (it is
// created by provisioning, e.g. bus.Conn.Provision). A missing bucket is an
// error that names it and wraps [ErrNotFound].
func Open[T any](ctx context.Context, js jetstream.JetStream, bucket string) (*Store[T], error) {
	b, err := js.KeyValue(ctx, bucket)
	switch {
	case err == nil:
		return New[T](b), nil
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("kv: bucket %q does not exist (provision it first): %w", bucket, ErrNotFound)
	case errors.Is(err, jetstream.ErrInvalidBucketName):
		return nil, fmt.Errorf("kv: bucket name %q is not valid (use letters, digits, - and _): %w", bucket, err)
	default:
		return nil, fmt.Errorf("kv: open bucket %q: %w", bucket, err)
	}
}

// Bucket returns the bucket's name.
func (s *Store[T]) Bucket() string { return s.bucket }

// Get returns the latest revision of key. It returns [ErrNotFound] when the
// key was never written or its latest revision is a delete or purge, and a
// [*DecodeError] when the stored value does not decode into T.
func (s *Store[T]) Get(ctx context.Context, key string) (Entry[T], error) {
	return s.get(ctx, "get", key)
}

func (s *Store[T]) get(ctx context.Context, op, key string) (Entry[T], error) {
	if err := validateKey(key); err != nil {
		return Entry[T]{}, s.fail(op, key, err)
	}
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return Entry[T]{}, s.fail(op, key, err)
	}
	ent, err := s.entry(e)
	if err != nil {
		return Entry[T]{}, s.fail(op, key, err)
	}
	return ent, nil
}

// GetRevision returns revision rev of key. It returns [ErrNotFound] when rev
// is not a revision of key, is a delete or purge marker, or is no longer kept
// (a bucket keeps at most 64 revisions per key, see the package doc).
func (s *Store[T]) GetRevision(ctx context.Context, key string, rev uint64) (Entry[T], error) {
	if err := validateKey(key); err != nil {
		return Entry[T]{}, s.fail("get revision", key, err)
	}
	e, err := s.kv.GetRevision(ctx, key, rev)
	if err != nil {
		return Entry[T]{}, s.fail(fmt.Sprintf("get revision %d of", rev), key, err)
	}
	ent, err := s.entry(e)
	if err != nil {
		return Entry[T]{}, s.fail(fmt.Sprintf("get revision %d of", rev), key, err)
	}
	return ent, nil
}

// Put writes v to key whatever its current revision, and returns the new
// revision.
func (s *Store[T]) Put(ctx context.Context, key string, v T) (uint64, error) {
	data, err := s.encode("put", key, v)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Put(ctx, key, data)
	if err != nil {
		return 0, s.fail("put", key, err)
	}
	return rev, nil
}

// Create writes v to key only if the key has no value (it was never written,
// or its latest revision is a delete or purge), and returns the new revision.
// Otherwise it returns [ErrExists].
func (s *Store[T]) Create(ctx context.Context, key string, v T) (uint64, error) {
	data, err := s.encode("create", key, v)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Create(ctx, key, data)
	if err != nil {
		if IsConflict(err) {
			err = ErrExists
		}
		return 0, s.fail("create", key, err)
	}
	return rev, nil
}

// Update writes v to key only if the key's latest revision is rev (a
// compare-and-set), and returns the new revision. Otherwise it returns a
// [*ConflictError] (which matches [ErrConflict]). A rev of 0 expects the key
// never to have been written; use [Store.Create] for that.
//
// Update costs one encode and one round trip: keep the revision from the last
// read or write and pass it here rather than reading first.
func (s *Store[T]) Update(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
	data, err := s.encode("update", key, v)
	if err != nil {
		return 0, err
	}
	return s.updateWithID(ctx, key, data, rev, "")
}

// UpdateOnce is [Store.Update] for a write that may be sent again after its
// answer was lost (a leader election, a dropped connection): id, the same
// for every attempt of one write and unique to it, goes in the message's
// Nats-Msg-Id, so an attempt made after an earlier one was stored is
// answered, within the bucket's duplicate window (2 minutes for buckets
// JetStream creates), with the revision that one got instead of a
// conflict. It needs a store [WithPublisher]; without one it returns an
// error.
func (s *Store[T]) UpdateOnce(ctx context.Context, key string, v T, rev uint64, id string) (uint64, error) {
	if s.opts.pub == nil {
		return 0, s.fail("update", key, errors.New("UpdateOnce needs a store made WithPublisher"))
	}
	data, err := s.encode("update", key, v)
	if err != nil {
		return 0, err
	}
	return s.updateWithID(ctx, key, data, rev, id)
}

func (s *Store[T]) updateWithID(ctx context.Context, key string, data []byte, rev uint64, id string) (uint64, error) {
	next, err := s.update(ctx, key, data, rev, id)
	if err != nil {
		if IsConflict(err) { // the bucket's Update and a publisher's answer alike
			err = &ConflictError{Key: key, Expected: rev}
		}
		return 0, s.fail("update", key, err)
	}
	return next, nil
}

// update writes data under key if its last revision is rev, with id as its
// Nats-Msg-Id unless empty (publisher only).
func (s *Store[T]) update(ctx context.Context, key string, data []byte, rev uint64, id string) (uint64, error) {
	if s.opts.pub == nil {
		return s.kv.Update(ctx, key, data, rev)
	}
	if err := validateKey(key); err != nil {
		return 0, err
	}
	msg := &nats.Msg{
		Subject: "$KV." + s.bucket + "." + key,
		Header:  nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)}},
		Data:    data,
	}
	if id != "" {
		msg.Header.Set(jetstream.MsgIDHeader, id)
	}
	ack, err := s.opts.pub.PublishMsg(ctx, msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Modify applies fn to the latest value of key and writes the result with
// [Store.Update]; when another writer got there first it reads again and
// calls fn again, up to 16 times with a short random pause between tries,
// then returns the last [*ConflictError]. fn may thus run more than once and
// must not have side effects; an error from fn is returned as is, unwrapped.
// Modify returns [ErrNotFound] when the key has no value.
//
// Modify calls on the same key through the same Store take turns, so they do
// not conflict with one another; only writers elsewhere (other stores, other
// processes, Put and Update) cause retries.
//
// The returned entry holds the value written and its revision; its Created
// is zero.
func (s *Store[T]) Modify(ctx context.Context, key string, fn func(cur T) (T, error)) (Entry[T], error) {
	if err := validateKey(key); err != nil {
		return Entry[T]{}, s.fail("modify", key, err)
	}
	if err := s.turns.acquire(ctx, key); err != nil {
		return Entry[T]{}, s.fail("modify", key, err)
	}
	defer s.turns.release(key)
	var conflict error
	for attempt := range maxModifyAttempts {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return Entry[T]{}, s.fail("modify", key, err)
			}
		}
		cur, err := s.get(ctx, "modify", key)
		if err != nil {
			return Entry[T]{}, err
		}
		next, err := fn(cur.Value)
		if err != nil {
			return Entry[T]{}, err
		}
		rev, err := s.Update(ctx, key, next, cur.Revision)
		if err == nil {
			return Entry[T]{Key: key, Value: next, Revision: rev}, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Entry[T]{}, err
		}
		conflict = err
	}
	return Entry[T]{}, conflict
}

// pause waits a random time before retry attempt (1, 2, …) of a lost
// compare-and-set, so that contending writers spread out: up to 500µs (about
// a read and a write), doubling per attempt, capped at 20ms.
func pause(ctx context.Context, attempt int) error {
	limit := min(500*time.Microsecond<<(attempt-1), 20*time.Millisecond)
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Delete marks key as deleted: [Store.Get] then returns [ErrNotFound] and
// [Store.Create] succeeds again. Earlier revisions stay in the history.
// Deleting a key that has no value is not an error.
func (s *Store[T]) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return s.fail("delete", key, err)
	}
	if err := s.kv.Delete(ctx, key); err != nil {
		return s.fail("delete", key, err)
	}
	return nil
}

// encode validates key and encodes v.
func (s *Store[T]) encode(op, key string, v T) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, s.fail(op, key, err)
	}
	data, err := codec.Marshal(v)
	if err != nil {
		return nil, s.fail(op, key, fmt.Errorf("encode %s: %w", s.typ, err))
	}
	return data, nil
}

// entry converts a JetStream entry, decoding its value unless it is a delete
// or purge marker.
func (s *Store[T]) entry(e jetstream.KeyValueEntry) (Entry[T], error) {
	ent := Entry[T]{Key: e.Key(), Revision: e.Revision(), Created: e.Created()}
	if e.Operation() != jetstream.KeyValuePut {
		ent.Deleted = true
		return ent, nil
	}
	if err := codec.Unmarshal(e.Value(), &ent.Value); err != nil {
		var zero T
		ent.Value = zero
		return ent, &DecodeError{Key: ent.Key, Revision: ent.Revision, Type: s.typ, Err: err}
	}
	return ent, nil
}

// fail maps JetStream errors to this package's and adds the bucket, the
// operation and the key.
func (s *Store[T]) fail(op, key string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		err = ErrNotFound
	case errors.Is(err, jetstream.ErrInvalidKey):
		err = fmt.Errorf("%w (%s)", ErrInvalidKey, keyRules)
	}
	return fmt.Errorf("kv %s: %s %q: %w", s.bucket, op, key, err)
}

// IsConflict reports whether err, from this package or straight from
// JetStream (a KV Create or Update, or a publish with an expected last
// sequence), is a lost compare-and-set: [ErrConflict] or [ErrExists], or
// JetStream's "wrong last sequence", which is error 10071 on one replica
// and 10164 on replicated streams (nats.go's ErrKeyExists matches only the
// first).
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) &&
			(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
				apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
