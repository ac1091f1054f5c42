package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// OrchHistory is how many revisions of each orchestration the
// orchestration bucket keeps.
const OrchHistory = 5

// Provision creates the streams and buckets of the wire contract, or updates
// them to this configuration when they exist. Several nodes may provision at
// once: each ends with the same configuration in place. It refuses, with an
// error wrapping [ErrInvalidConfig], to take over a stream of the same name
// that holds another prefix's subjects. Replicas and partitions the
// configuration left at 0 are first taken from the provisioned mailbox
// stream (see [Config.Replicas], [Config.Partitions]): call Provision before
// using the connection's names and configuration, as the binaries do.
func (c *Conn) Provision(ctx context.Context) error {
	if err := checkServerVersion(c.NATS().ConnectedServerVersion()); err != nil {
		return err
	}
	err := c.provision(ctx)
	for attempt := 0; errors.Is(err, errProvisionedMeanwhile) && attempt < 3; attempt++ {
		// Another process created the mailbox stream with its layout
		// after Adopt found none (or could not read it): adopt that one.
		err = c.provision(ctx)
	}
	if errors.Is(err, errProvisionedMeanwhile) {
		return fmt.Errorf("%w: the deployment was provisioned by another process while this one started, with another partition or stream group count than the defaults, and reading its layout failed 4 times: start again, or set the counts", ErrInvalidConfig)
	}
	return err
}

// errProvisionedMeanwhile: the mailbox stream appeared after Adopt looked,
// with another partition (or stream group) count than the default this
// connection took; Provision adopts it and starts again.
var errProvisionedMeanwhile = errors.New("the mailbox stream was provisioned meanwhile")

func (c *Conn) provision(ctx context.Context) error {
	c.Adopt(ctx)
	n, cfg := c.names, c.cfg
	if err := c.checkLegacy(ctx); err != nil {
		return err
	}
	dead := c.logStream(n.DeadStream(), "dead letters: records effectors could not process", n.DeadLetters())
	dead.MaxConsumers = 0 // the server's default
	if n.Groups() != cfg.Groups {
		return fmt.Errorf("%w: stream groups %d: more than the deployment's %d partitions (each group holds at least one partition)", ErrInvalidConfig, cfg.Groups, n.Partitions())
	}
	streams := []jetstream.StreamConfig{c.mailboxConfig(), c.logStream(n.OutboxStream(), "effector outboxes: the record log of what effectors emitted", n.Outboxes())}
	if n.Groups() > 1 {
		streams = append(c.groupMailboxConfigs(), c.groupOutboxConfigs()...)
	}
	streams = append(streams, dead)
	for i, sc := range streams {
		if err := c.checkStreamPrefix(ctx, sc.Name); err != nil {
			return err
		}
		var have *jetstream.StreamConfig
		if s, err := c.JetStream().Stream(ctx, sc.Name); err == nil {
			have = &s.CachedInfo().Config
		}
		c.retain(&streams[i], have)
	}
	if err := c.checkPartitions(ctx); err != nil {
		return err
	}
	if err := c.checkGroups(ctx); err != nil {
		return err
	}
	if err := c.retireOutbox(ctx); err != nil {
		return err
	}
	for _, sc := range streams {
		if c.streamInPlace(ctx, sc) {
			continue
		}
		if err := retry(ctx, func() error { return c.putStream(ctx, sc) }); err != nil {
			if errors.Is(err, errProvisionedMeanwhile) {
				return err
			}
			return fmt.Errorf("provision stream %s: %w", sc.Name, c.explain(err))
		}
	}
	if err := c.provisionTimers(ctx); err != nil {
		return err
	}
	var buckets []jetstream.KeyValueConfig
	for g, name := range n.StateBuckets() {
		desc := "effector state documents"
		if n.Groups() > 1 {
			desc = fmt.Sprintf("effector state documents, stream group %d of %d", g, n.Groups())
		}
		buckets = append(buckets, jetstream.KeyValueConfig{Bucket: name, Description: desc, History: uint8(cfg.StateHistory), Storage: jetstream.FileStorage, Replicas: cfg.Replicas})
	}
	buckets = append(buckets, []jetstream.KeyValueConfig{
		{Bucket: n.OrchBucket(), Description: "orchestration state", History: OrchHistory, Storage: jetstream.FileStorage, Replicas: cfg.Replicas},
		{Bucket: n.PlaceBucket(), Description: "placement: node heartbeats and partition leases", History: 1, Storage: jetstream.FileStorage, Replicas: cfg.Replicas},
	}...)
	for _, kc := range buckets {
		if c.bucketInPlace(ctx, kc) {
			continue
		}
		if err := retry(ctx, func() error {
			_, err := c.JetStream().CreateOrUpdateKeyValue(ctx, kc)
			return err
		}); err != nil {
			return fmt.Errorf("provision bucket %s: %w", kc.Bucket, c.explain(err))
		}
	}
	if n.Groups() == 1 {
		return nil
	}
	if err := c.ensureMapping(ctx); err != nil {
		return err
	}
	if cfg.Replicas > 1 {
		leaders, err := c.SpreadLeaders(ctx)
		if err != nil {
			return err
		}
		c.log.Info("stream group leaders", "leaders", leaders)
	}
	return nil
}

// streamInPlace reports whether stream sc exists with the settings
// provisioning sets. Then it is left alone: an update with the same settings
// still rewrites the stream's configuration on the server, which every node
// start would otherwise do while other nodes create consumers.
func (c *Conn) streamInPlace(ctx context.Context, sc jetstream.StreamConfig) bool {
	s, err := c.JetStream().Stream(ctx, sc.Name)
	if err != nil {
		return false
	}
	have := s.CachedInfo().Config
	sameTransform := (have.SubjectTransform == nil) == (sc.SubjectTransform == nil) &&
		(sc.SubjectTransform == nil || *have.SubjectTransform == *sc.SubjectTransform)
	return sameTransform && slices.Equal(have.Subjects, sc.Subjects) && have.Description == sc.Description &&
		have.Replicas == sc.Replicas && have.Duplicates == sc.Duplicates && have.MaxAge == sc.MaxAge && have.MaxBytes == sc.MaxBytes &&
		have.MaxConsumers == sc.MaxConsumers && have.Retention == sc.Retention && have.Storage == sc.Storage &&
		have.AllowDirect == sc.AllowDirect
}

// bucketInPlace reports whether bucket kc exists with the settings
// provisioning sets (see streamInPlace).
func (c *Conn) bucketInPlace(ctx context.Context, kc jetstream.KeyValueConfig) bool {
	kv, err := c.JetStream().KeyValue(ctx, kc.Bucket)
	if err != nil {
		return false
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return false
	}
	info, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return false
	}
	have := info.StreamInfo().Config
	return st.History() == int64(kc.History) && have.Replicas == kc.Replicas && have.Description == kc.Description && have.Storage == kc.Storage
}

// mailboxConfig is the mailbox stream's configuration: it listens on
// <prefix>.mbox.*.* and stores each record under
// <prefix>.mbox.<partition>.<kind>.<id>.
func (c *Conn) mailboxConfig() jetstream.StreamConfig {
	n := c.names
	sc := c.logStream(n.MailboxStream(), "effector mailboxes, partitioned: the record log of what effectors received", n.MailboxIngest())
	sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: n.MailboxIngest(), Destination: n.MailboxTransform()}
	return sc
}

// logStream is the configuration of a stream of the record log: file
// storage, limits retention (records stay after processing), the
// connection's replicas, duplicate window and consumer limit. Its age and
// size limits are set by [Conn.retain].
func (c *Conn) logStream(name, description, subject string) jetstream.StreamConfig {
	cfg := c.cfg
	return jetstream.StreamConfig{
		Name:         name,
		Description:  description,
		Subjects:     []string{subject},
		Retention:    jetstream.LimitsPolicy,
		Storage:      jetstream.FileStorage,
		Replicas:     cfg.Replicas,
		Duplicates:   cfg.DuplicateWindow,
		MaxConsumers: cfg.MaxConsumers,
		AllowDirect:  true,
	}
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
	s, err := c.JetStream().Stream(ctx, stream)
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
// putStream creates stream sc or updates it to sc. The mailbox stream is
// created only where there is none: one that another process created since
// checkPartitions looked is checked again, so that a deployment's
// partition count never changes under an update (two first nodes, one
// with --partitions and one without, starting at once).
func (c *Conn) putStream(ctx context.Context, sc jetstream.StreamConfig) error {
	if sc.Name != c.names.MailboxStream() {
		_, err := c.JetStream().CreateOrUpdateStream(ctx, sc)
		return err
	}
	_, err := c.JetStream().CreateStream(ctx, sc)
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return err
	}
	s, err := c.JetStream().Stream(ctx, sc.Name)
	if err != nil {
		return err
	}
	if err := c.matchPartitions(s.CachedInfo().Config); err != nil {
		if c.unsetPartitions {
			return errProvisionedMeanwhile
		}
		return err
	}
	_, err = c.JetStream().UpdateStream(ctx, sc)
	return err
}

func retry(ctx context.Context, op func() error) error {
	var err error
	for attempt := range 8 {
		if err = op(); err == nil {
			return nil
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, errProvisionedMeanwhile) || errors.Is(err, ErrInvalidConfig) {
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

// MailboxStream returns the mailbox stream, checking that its partition
// count is this connection's (see [Config.Partitions]).
//
// With stream groups ([Config.Groups] > 1) there is no one mailbox stream:
// it returns an error wrapping [ErrGroupsUnsupported]; use
// [Conn.MailboxStreamOf].
func (c *Conn) MailboxStream(ctx context.Context) (jetstream.Stream, error) {
	if c.names.Groups() > 1 {
		return nil, c.unsupportedWithGroups("MailboxStream", "mailbox stream")
	}
	s, err := c.JetStream().Stream(ctx, c.names.MailboxStream())
	if err != nil {
		if lerr := c.checkLegacy(ctx); lerr != nil {
			return nil, lerr
		}
		return nil, c.explainNotFound(ctx, fmt.Errorf("stream %s: %w (was it provisioned?)", c.names.MailboxStream(), err))
	}
	if err := c.matchPartitions(s.CachedInfo().Config); err != nil {
		return nil, err
	}
	return s, nil
}

// OutboxStream returns the outbox stream.
//
// With stream groups ([Config.Groups] > 1) there is no one outbox stream: it
// returns an error wrapping [ErrGroupsUnsupported]; use
// [Conn.OutboxStreamOf].
func (c *Conn) OutboxStream(ctx context.Context) (jetstream.Stream, error) {
	if c.names.Groups() > 1 {
		return nil, c.unsupportedWithGroups("OutboxStream", "outbox stream")
	}
	s, err := c.JetStream().Stream(ctx, c.names.OutboxStream())
	if err != nil {
		return nil, c.explainNotFound(ctx, fmt.Errorf("stream %s: %w (was it provisioned?)", c.names.OutboxStream(), err))
	}
	if slices.Contains(s.CachedInfo().Config.Subjects, c.names.RetiredOutboxes()) {
		// Stream groups took over: a reader of it would wait for outputs
		// that go to the groups' outbox streams.
		return nil, c.explainNotFound(ctx, fmt.Errorf("stream %s: %w: it is retired (its subjects are %s) and keeps only outputs from before the deployment moved to stream groups", c.names.OutboxStream(), ErrGroupsUnsupported, c.names.RetiredOutboxes()))
	}
	return s, nil
}

// checkPartitions fails when the mailbox stream exists with another
// partition count than this connection's.
func (c *Conn) checkPartitions(ctx context.Context) error {
	s, err := c.JetStream().Stream(ctx, c.names.MailboxStream())
	if err != nil {
		return nil // not there yet, or creating it reports the problem
	}
	sc := s.CachedInfo().Config
	if sc.SubjectTransform == nil && !slices.Contains(sc.Subjects, c.names.MailboxIngest()) {
		return nil // retired by MigrateGroups; checkGroups checks the groups
	}
	if p, ok := c.names.PartitionsOfTransform(transformDest(sc)); ok && p != c.names.Partitions() && c.unsetPartitions {
		// Not configured but taken as the default: another first process
		// created the stream after Adopt looked.
		return errProvisionedMeanwhile
	}
	return c.matchPartitions(sc)
}

func (c *Conn) matchPartitions(sc jetstream.StreamConfig) error {
	if sc.SubjectTransform == nil {
		return fmt.Errorf("%w: stream %s has no partitioning subject transform: it was not provisioned by effectors (delete it or use another prefix)", ErrInvalidConfig, sc.Name)
	}
	p, ok := c.names.PartitionsOfTransform(sc.SubjectTransform.Destination)
	if !ok {
		return fmt.Errorf("%w: stream %s transforms mailboxes to %q, not the partitioning effectors expects", ErrInvalidConfig, sc.Name, sc.SubjectTransform.Destination)
	}
	if p != c.names.Partitions() {
		return fmt.Errorf("%w: stream %s has %d mailbox partitions and this connection is configured for %d: the count is fixed at provisioning (set partitions to %d, or migrate as the README's operations section says)", ErrInvalidConfig, sc.Name, p, c.names.Partitions(), p)
	}
	return nil
}

// ErrLegacyLayout: the deployment still has the stream of the previous
// layout (EA_RECORDS, a consumer per effector). See [Conn.Provision].
var ErrLegacyLayout = errors.New("store written by the previous layout")

// checkLegacy refuses a deployment that still has the previous layout's
// records stream: its state documents count sequences of that stream, which
// the partitioned mailbox stream does not continue.
func (c *Conn) checkLegacy(ctx context.Context) error {
	s, err := c.JetStream().Stream(ctx, c.names.LegacyRecordsStream())
	if err != nil {
		return nil
	}
	info := s.CachedInfo()
	if !slices.Contains(info.Config.Subjects, c.names.Mailboxes()) {
		return nil // migrated: kept for its history
	}
	return fmt.Errorf("%w: stream %s (%d records, last sequence %d) holds mailboxes of the previous layout, which this release reads through partitions of stream %s instead: "+
		"let the previous release process every mailbox, stop it, then start ea-node once with --migrate (EA_MIGRATE=true; from Go, bus.Conn.Migrate), which starts the new mailbox stream after sequence %d and keeps %s read-only under <prefix>.legacy.>; state documents are kept",
		ErrLegacyLayout, info.Config.Name, info.State.Msgs, info.State.LastSeq, c.names.MailboxStream(), info.State.LastSeq, info.Config.Name)
}

// StateBucket returns the KV bucket of state documents. With stream groups
// ([Config.Groups] > 1) there is no one state bucket: it returns an error
// wrapping [ErrGroupsUnsupported]; use [Conn.StateBucketOf].
func (c *Conn) StateBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if c.names.Groups() > 1 {
		return nil, c.unsupportedWithGroups("StateBucket", "state bucket")
	}
	kv, err := c.JetStream().KeyValue(ctx, c.names.StateBucket())
	if err != nil {
		return nil, c.explainNotFound(ctx, fmt.Errorf("bucket %s: %w (was it provisioned?)", c.names.StateBucket(), err))
	}
	return kv, nil
}
