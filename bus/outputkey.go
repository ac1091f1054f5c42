package bus

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// OutputKeySize is the size in bytes of the output id key.
const OutputKeySize = 32

// outputKeyName is the key of the output id key in the key bucket.
const outputKeyName = "output-id"

// OutputKey returns the secret nodes sign the ids of the records they emit
// with, so that a client that cannot read it cannot predict those ids (and
// suppress a real output by publishing its id first: JetStream drops a
// record whose id it has seen within the duplicate window). It lives in the
// KV bucket [Names.KeyBucket] under "output-id": the first node creates both,
// 32 random bytes, and every node after reads the same key, so a record
// re-emitted by another node after a crash keeps its id. Keep the bucket
// readable by nodes only (deploy/nats); deleting it changes the ids of
// records emitted from then on, which is harmless once the duplicate window
// has passed.
func (c *Conn) OutputKey(ctx context.Context) ([]byte, error) {
	name := c.names.KeyBucket()
	bucket, err := c.JS.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		bucket, err = c.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "runtime secrets: the key of output record ids (nodes only)",
			History: 1, Storage: jetstream.FileStorage, Replicas: c.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			bucket, err = c.JS.KeyValue(ctx, name) // another node was first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, c.explain(err))
	}
	var createErr error
	for range 3 {
		ent, err := bucket.Get(ctx, outputKeyName)
		switch {
		case err == nil && len(ent.Value()) == OutputKeySize:
			return ent.Value(), nil
		case err == nil:
			return nil, fmt.Errorf("bucket %s, key %s: %d bytes, want %d (delete the key to have a new one made)", name, outputKeyName, len(ent.Value()), OutputKeySize)
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return nil, fmt.Errorf("bucket %s, key %s: %w", name, outputKeyName, c.explain(err))
		}
		key := make([]byte, OutputKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("output id key: %w", err)
		}
		if _, createErr = bucket.Create(ctx, outputKeyName, key); createErr == nil {
			return key, nil
		}
		// Most likely another node created it first (a conflict, 10071 or
		// 10164 on replicated buckets): read theirs.
	}
	return nil, fmt.Errorf("bucket %s, key %s: cannot create it: %w", name, outputKeyName, c.explain(createErr))
}
