package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Provision creates the streams and buckets of the wire contract, or updates
// them to this configuration when they exist. Several nodes may provision at
// once: each ends with the same configuration in place. It refuses, with an
// error wrapping [ErrInvalidConfig], to take over a stream of the same name
// that holds another prefix's subjects.
func (c *Conn) Provision(ctx context.Context) error {
	n, cfg := c.names, c.cfg
	streams := []jetstream.StreamConfig{
		{
			Name:         n.RecordsStream(),
			Description:  "effector mailboxes and outboxes: the record log",
			Subjects:     []string{n.prefix + ".mbox.>", n.prefix + ".out.>"},
			Retention:    jetstream.LimitsPolicy,
			Storage:      jetstream.FileStorage,
			Replicas:     cfg.Replicas,
			Duplicates:   cfg.DuplicateWindow,
			MaxAge:       cfg.MaxAge,
			MaxConsumers: cfg.MaxConsumers,
			AllowDirect:  true,
		},
		{
			Name:        n.DeadStream(),
			Description: "dead letters: records effectors could not process",
			Subjects:    []string{n.prefix + ".dead.>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  cfg.DuplicateWindow,
			MaxAge:      cfg.MaxAge,
			AllowDirect: true,
		},
	}
	for _, sc := range streams {
		if err := c.checkStreamPrefix(ctx, sc.Name); err != nil {
			return err
		}
		if err := retry(ctx, func() error {
			_, err := c.JS.CreateOrUpdateStream(ctx, sc)
			return err
		}); err != nil {
			return fmt.Errorf("provision stream %s: %w", sc.Name, c.explain(err))
		}
	}
	buckets := []jetstream.KeyValueConfig{
		{Bucket: n.StateBucket(), Description: "effector state documents", History: uint8(cfg.StateHistory), Storage: jetstream.FileStorage, Replicas: cfg.Replicas},
		{Bucket: n.OrchBucket(), Description: "orchestration state", History: 5, Storage: jetstream.FileStorage, Replicas: cfg.Replicas},
		{Bucket: n.PlaceBucket(), Description: "placement: node heartbeats, driven effectors, wake-up scan positions", History: 1, Storage: jetstream.FileStorage, Replicas: cfg.Replicas},
	}
	for _, kc := range buckets {
		if err := retry(ctx, func() error {
			_, err := c.JS.CreateOrUpdateKeyValue(ctx, kc)
			return err
		}); err != nil {
			return fmt.Errorf("provision bucket %s: %w", kc.Bucket, c.explain(err))
		}
	}
	return nil
}

// errCodeReplicasNotClustered is JetStream's "replicas > 1 not supported in
// non-clustered mode".
const errCodeReplicasNotClustered = 10074

// explain adds what to do to the JetStream errors a misconfiguration gives.
func (c *Conn) explain(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeReplicasNotClustered {
		return fmt.Errorf("%w: %w: replicas %d need a NATS cluster of at least %d servers; use replicas 1 against a single server", ErrInvalidConfig, err, c.cfg.Replicas, c.cfg.Replicas)
	}
	return err
}

// checkStreamPrefix fails when stream exists with subjects outside this
// prefix. Prefixes that differ only in case or in "-" versus "_" ("ea" and
// "EA", "a-b" and "a_b") share stream names, and updating the stream to our
// subjects would silently take it away from the other deployment.
func (c *Conn) checkStreamPrefix(ctx context.Context, stream string) error {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return nil // not there yet, or CreateOrUpdateStream reports the problem
	}
	for _, subject := range s.CachedInfo().Config.Subjects {
		if !strings.HasPrefix(subject, c.names.prefix+".") {
			return fmt.Errorf("provision stream %s: %w: prefix %q: the stream already holds subject %q of another deployment (prefixes that differ only in case or in - versus _ share stream names)", stream, ErrInvalidConfig, c.names.prefix, subject)
		}
	}
	return nil
}

// retry runs op until it succeeds, ctx ends or it failed 8 times: concurrent
// provisioning loses create races that succeed as updates on the next try.
func retry(ctx context.Context, op func() error) error {
	var err error
	for attempt := range 8 {
		if err = op(); err == nil {
			return nil
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return err
}

// Stream returns the records stream.
func (c *Conn) Stream(ctx context.Context) (jetstream.Stream, error) {
	s, err := c.JS.Stream(ctx, c.names.RecordsStream())
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (was it provisioned?)", c.names.RecordsStream(), err)
	}
	return s, nil
}

// StateBucket returns the KV bucket of state documents.
func (c *Conn) StateBucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.JS.KeyValue(ctx, c.names.StateBucket())
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w (was it provisioned?)", c.names.StateBucket(), err)
	}
	return kv, nil
}
