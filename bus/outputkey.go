package bus

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OutputKeySize is the size in bytes of the output id key.
const OutputKeySize = 32

// outputKeyName is the key of the output id key in the key bucket.
const outputKeyName = "output-id"

// errCodeNoPeers is JetStream's "no suitable peers for placement", and
// noPeersPatience how long creating the key bucket waits for one.
const (
	errCodeNoPeers  = 10005
	noPeersPatience = 10 * time.Second
)

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
//
// A bucket just created on a cluster answers only once its stream has a
// leader: OutputKey retries what NATS answers meanwhile (no responders, a
// timeout) for up to outputKeyPatience, or until ctx ends.
func (c *Conn) OutputKey(ctx context.Context) ([]byte, error) {
	deadline := time.Now().Add(outputKeyPatience)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		key, err := c.outputKey(ctx)
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return key, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// outputKeyPatience is how long OutputKey retries transient failures.
const outputKeyPatience = 30 * time.Second

// transient reports whether err is NATS saying "not now" (no responders, a
// request that timed out, a stream without a leader yet) rather than "no".
func transient(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// outputKey is one attempt of OutputKey.
func (c *Conn) outputKey(ctx context.Context) ([]byte, error) {
	name := c.names.KeyBucket()
	bucket, err := c.JetStream().KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// A young or changing cluster can answer that no peer is fit for
		// the replicas (a peer not yet reported, or restarting): that
		// passes, so it is tried again for a while, not taken as final.
		giveUp := time.Now().Add(noPeersPatience)
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			bucket, err = c.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: name, Description: "runtime secrets: the key of output record ids (nodes only)",
				History: 1, Storage: jetstream.FileStorage, Replicas: c.cfg.Replicas,
			})
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeNoPeers || time.Now().After(giveUp) {
				break
			}
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
			}
			break
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			bucket, err = c.JetStream().KeyValue(ctx, name) // another node was first
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
