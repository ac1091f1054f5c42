package actor

import (
	"context"
	"errors"
	"fmt"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go/jetstream"
)

// states is the state bucket as the runtime uses it: a [kv.Store] of
// documents that refuses to write a document whose kind and id are not those
// of its key, and reports one it reads as a [*CorruptStateError] matching
// [ErrStateMismatch]. So a document that names another effector (written by
// hand, or by a client with write access to the bucket) is never taken for
// this one's, and the runtime never writes one. A document that does not
// decode is a [*CorruptStateError] too. With stream groups it is one store
// per group's bucket, a key's being its effector's group's (see [states.of]).
type states struct {
	kvs   []*kv.Store[Document] // by stream group
	names bus.Names
}

func newStates(buckets []jetstream.KeyValue, names bus.Names, opts ...kv.Option) *states {
	s := &states{names: names}
	for _, b := range buckets {
		s.kvs = append(s.kvs, kv.New[Document](b, opts...))
	}
	return s
}

// of is the store of key's stream group. A key that names no valid effector
// (no document is ever written under it) is looked up in group 0's.
func (s *states) of(key string) *kv.Store[Document] {
	if len(s.kvs) == 1 {
		return s.kvs[0]
	}
	g, _ := s.names.GroupOfKey(key)
	return s.kvs[g]
}

// check returns an error matching ErrStateMismatch when doc does not belong
// under key.
func (s *states) check(op, key string, doc Document) error {
	if want := s.names.StateKey(doc.Ref()); want != key {
		return fmt.Errorf("%s state %s: %w: the document names kind %q id %q (key %q)", op, key, ErrStateMismatch, cutText(doc.Kind), cutText(doc.ID), want)
	}
	return nil
}

// checkRead is check of a document read at revision rev: a mismatch is a
// *CorruptStateError.
func (s *states) checkRead(key string, rev uint64, doc Document) error {
	if err := s.check("read", key, doc); err != nil {
		return &CorruptStateError{Key: key, Revision: rev, Err: err}
	}
	return nil
}

// corrupt turns a decoding error of the document under key into a
// *CorruptStateError; other errors are returned as they are.
func corrupt(key string, err error) error {
	var de *kv.DecodeError
	if errors.As(err, &de) {
		return &CorruptStateError{Key: key, Revision: de.Revision, Err: fmt.Errorf("does not decode as a state document: %w", de.Err)}
	}
	return err
}

// Get reads the document under key. A document that does not decode, or
// names another effector, is a *CorruptStateError.
func (s *states) Get(ctx context.Context, key string) (kv.Entry[Document], error) {
	ent, err := s.of(key).Get(ctx, key)
	if err != nil {
		return ent, corrupt(key, err)
	}
	if err := s.checkRead(key, ent.Revision, ent.Value); err != nil {
		return kv.Entry[Document]{}, err
	}
	return ent, nil
}

// Create writes doc under key if key has no document.
func (s *states) Create(ctx context.Context, key string, doc Document) (uint64, error) {
	if err := s.check("create", key, doc); err != nil {
		return 0, err
	}
	return s.of(key).Create(ctx, key, doc)
}

// Update writes doc under key if its revision is still rev.
func (s *states) Update(ctx context.Context, key string, doc Document, rev uint64) (uint64, error) {
	if err := s.check("write", key, doc); err != nil {
		return 0, err
	}
	return s.of(key).Update(ctx, key, doc, rev)
}

// UpdateOnce is Update for a write sent again after a lost answer: every
// attempt carries id, and one made after an earlier attempt was stored is
// answered with that one's revision (see [kv.Store.UpdateOnce]; on a
// cluster: a single server checks the revision first and answers a
// conflict).
func (s *states) UpdateOnce(ctx context.Context, key string, doc Document, rev uint64, id string) (uint64, error) {
	if err := s.check("write", key, doc); err != nil {
		return 0, err
	}
	return s.of(key).UpdateOnce(ctx, key, doc, rev, id)
}

// Modify reads the document under key, applies fn and writes the result with
// compare-and-set, as [kv.Store.Modify]; both documents are checked.
func (s *states) Modify(ctx context.Context, key string, fn func(Document) (Document, error)) (kv.Entry[Document], error) {
	ent, err := s.of(key).Modify(ctx, key, func(cur Document) (Document, error) {
		if err := s.checkRead(key, 0, cur); err != nil {
			return cur, err
		}
		next, err := fn(cur)
		if err != nil {
			return next, err
		}
		return next, s.check("write", key, next)
	})
	return ent, corrupt(key, err)
}

// cutText shortens s for an error message.
func cutText(s string) string {
	if len(s) > 140 {
		return s[:140] + "…"
	}
	return s
}
