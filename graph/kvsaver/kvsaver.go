// Package kvsaver is a graph.Checkpointer on a JetStream key-value bucket,
// so a graph's threads survive the process (and a restart of the NATS
// server): a fresh process resumes a thread from its last checkpoint.
//
// # Layout
//
// Each checkpoint is its own key, <prefix>.<thread>.<checkpoint id> (prefix
// "cp" by default), in the bucket <prefix>_orch of the deployment (ea_orch)
// unless Config.Bucket names another one (created if missing). A key is
// written once: thread history never relies on a key's revision history
// (which JetStream caps at 64). The head of a thread is the newest key of
// <prefix>.<thread>.*; its stream sequence is the checkpoint's version.
//
// # One writer per thread
//
// Put publishes with Nats-Expected-Last-Subject-Sequence on the wildcard of
// the thread's keys: the server accepts the checkpoint only if the thread's
// newest message is still the head the writer read, in one round trip, and
// otherwise answers with a *graph.ConflictError.
//
// # Retention and size
//
// A thread keeps its newest Config.Retention checkpoints
// (graph.DefaultRetention): every PruneEvery puts, older ones are purged
// with one stream purge request. List never returns more than Retention.
// A checkpoint whose encoding would not fit the connection's max payload
// (1 MB by default) fails with a *graph.TooLargeError before anything is
// published.
package kvsaver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
)

// Config configures a Saver. The zero value is valid: the deployment's
// orchestration bucket, prefix "cp", graph.DefaultRetention.
type Config struct {
	// Bucket is the KV bucket (default: conn.Names().OrchBucket(), ea_orch,
	// provisioned by bus.Conn.Provision). Another bucket is created when
	// missing.
	Bucket string
	// Prefix is the first token of every key (default "cp").
	Prefix string
	// Retention is how many checkpoints per thread are kept (default
	// graph.DefaultRetention; at least 2).
	Retention int
	// PruneEvery is how often, in puts to a thread, older checkpoints are
	// purged (default Retention/10, at least 1). Up to PruneEvery-1
	// checkpoints beyond Retention may stay stored between purges.
	PruneEvery int
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports bad settings, wrapping graph.ErrInvalidArgument.
func (c Config) Validate() error {
	if c.Prefix != "" && !prefixRE.MatchString(c.Prefix) {
		return fmt.Errorf("%w: kvsaver: prefix %q: use one token of 1-64 letters, digits, - or _", graph.ErrInvalidArgument, c.Prefix)
	}
	if c.Retention < 0 || c.Retention == 1 {
		return fmt.Errorf("%w: kvsaver: retention %d: keep at least 2 checkpoints per thread (0: default %d)", graph.ErrInvalidArgument, c.Retention, graph.DefaultRetention)
	}
	if c.PruneEvery < 0 {
		return fmt.Errorf("%w: kvsaver: negative PruneEvery %d", graph.ErrInvalidArgument, c.PruneEvery)
	}
	return nil
}

// Saver is a graph.Checkpointer on JetStream KV. Safe for concurrent use.
type Saver struct {
	js         jetstream.JetStream
	stream     jetstream.Stream
	store      *kv.Store[graph.Checkpoint]
	bucket     string
	prefix     string
	retention  int
	pruneEvery uint64
	maxSize    int
}

var _ graph.Checkpointer = (*Saver)(nil)

// New returns a Saver on conn's JetStream.
func New(ctx context.Context, conn *bus.Conn, cfg Config) (*Saver, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: kvsaver: nil connection", graph.ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Bucket == "" {
		cfg.Bucket = conn.Names().OrchBucket()
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "cp"
	}
	if cfg.Retention == 0 {
		cfg.Retention = graph.DefaultRetention
	}
	if cfg.PruneEvery == 0 {
		cfg.PruneEvery = max(1, cfg.Retention/10)
	}
	b, err := conn.JetStream().KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		b, err = conn.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: cfg.Bucket, Description: "graph checkpoints", Storage: jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			b, err = conn.JetStream().KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kvsaver: open bucket %s: %w", cfg.Bucket, err)
	}
	st, err := conn.JetStream().Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("kvsaver: open the stream of bucket %s: %w", cfg.Bucket, err)
	}
	// Leave room for the subject, headers and protocol overhead.
	maxSize := int(conn.NATS().MaxPayload()) - 1024
	if mv := st.CachedInfo().Config.MaxMsgSize; mv > 0 && int(mv) < maxSize {
		maxSize = int(mv)
	}
	return &Saver{
		js: conn.JetStream(), stream: st, store: kv.New[graph.Checkpoint](b),
		bucket: cfg.Bucket, prefix: cfg.Prefix, retention: cfg.Retention,
		pruneEvery: uint64(cfg.PruneEvery), maxSize: maxSize,
	}, nil
}

// MaxSize returns the largest encoded checkpoint Put accepts.
func (s *Saver) MaxSize() int { return s.maxSize }

func (s *Saver) threadSubject(thread string) string {
	return "$KV." + s.bucket + "." + s.prefix + "." + thread + ".*"
}

func (s *Saver) key(thread, id string) string { return s.prefix + "." + thread + "." + id }

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func checkThread(thread string) error {
	if !tokenRE.MatchString(thread) {
		return fmt.Errorf("%w: kvsaver: thread id %q: use 1-128 letters, digits, - or _", graph.ErrInvalidArgument, thread)
	}
	return nil
}

// Put implements graph.Checkpointer: one publish, accepted by the server
// only if the thread's newest checkpoint is still at version head.
func (s *Saver) Put(ctx context.Context, cp graph.Checkpoint, head uint64) (uint64, error) {
	if err := checkThread(cp.Thread); err != nil {
		return 0, err
	}
	if cp.Seq == 0 || cp.ID != graph.FormatID(cp.Seq) {
		return 0, fmt.Errorf("%w: kvsaver: checkpoint %q of thread %q: Seq must be at least 1 and ID must be graph.FormatID(Seq)", graph.ErrInvalidArgument, cp.ID, cp.Thread)
	}
	if head == 0 && cp.Seq != 1 {
		return 0, fmt.Errorf("%w: kvsaver: the first checkpoint of thread %q must have Seq 1, not %d", graph.ErrInvalidArgument, cp.Thread, cp.Seq)
	}
	data, err := codec.Marshal(cp)
	if err != nil {
		return 0, fmt.Errorf("kvsaver: encode checkpoint %s of thread %q: %w", cp.ID, cp.Thread, err)
	}
	if len(data) > s.maxSize {
		return 0, &graph.TooLargeError{Thread: cp.Thread, Size: len(data), Limit: s.maxSize}
	}
	msg := &nats.Msg{
		Subject: "$KV." + s.bucket + "." + s.key(cp.Thread, cp.ID),
		Data:    data,
		Header: nats.Header{
			"Nats-Expected-Last-Subject-Sequence":         []string{strconv.FormatUint(head, 10)},
			"Nats-Expected-Last-Subject-Sequence-Subject": []string{s.threadSubject(cp.Thread)},
		},
	}
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		if kv.IsConflict(err) {
			return 0, &graph.ConflictError{Thread: cp.Thread, Detail: fmt.Sprintf("expected head version %d: %v", head, err)}
		}
		return 0, fmt.Errorf("kvsaver: write checkpoint %s of thread %q: %w", cp.ID, cp.Thread, err)
	}
	if cp.Seq > uint64(s.retention) && cp.Seq%s.pruneEvery == 0 {
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.threadSubject(cp.Thread)), jetstream.WithPurgeKeep(uint64(s.retention))); err != nil {
			// The checkpoint is written; pruning is retried at the next purge.
			return ack.Sequence, nil
		}
	}
	return ack.Sequence, nil
}

// Get implements graph.Checkpointer.
func (s *Saver) Get(ctx context.Context, thread, id string) (graph.Checkpoint, error) {
	if err := checkThread(thread); err != nil {
		return graph.Checkpoint{}, err
	}
	subj := s.threadSubject(thread)
	if id != "" {
		if !tokenRE.MatchString(id) {
			return graph.Checkpoint{}, fmt.Errorf("%w: kvsaver: checkpoint id %q", graph.ErrInvalidArgument, id)
		}
		subj = "$KV." + s.bucket + "." + s.key(thread, id)
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return graph.Checkpoint{}, notFound(thread, id)
	}
	if err != nil {
		return graph.Checkpoint{}, fmt.Errorf("kvsaver: read thread %q: %w", thread, err)
	}
	if op := m.Header.Get("KV-Operation"); op != "" {
		return graph.Checkpoint{}, notFound(thread, id)
	}
	var cp graph.Checkpoint
	if err := codec.Unmarshal(m.Data, &cp); err != nil {
		return graph.Checkpoint{}, fmt.Errorf("kvsaver: decode %s: %w", m.Subject, err)
	}
	cp.Version = m.Sequence
	if id != "" && cp.Seq+uint64(s.retention) <= s.headSeqHint(ctx, thread, cp.Seq) {
		return graph.Checkpoint{}, notFound(thread, id)
	}
	return cp, nil
}

// headSeqHint returns the Seq of the thread's head, or seq when it cannot
// tell (the check it serves then errs on the side of returning the
// checkpoint).
func (s *Saver) headSeqHint(ctx context.Context, thread string, seq uint64) uint64 {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.threadSubject(thread))
	if err != nil {
		return seq
	}
	i := strings.LastIndexByte(m.Subject, '.')
	n, err := strconv.ParseUint(m.Subject[i+1:], 10, 64)
	if err != nil {
		return seq
	}
	return n
}

// List implements graph.Checkpointer.
func (s *Saver) List(ctx context.Context, thread string, limit int) ([]graph.Checkpoint, error) {
	if err := checkThread(thread); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: kvsaver: List: negative limit %d", graph.ErrInvalidArgument, limit)
	}
	keys, err := s.store.Keys(ctx, s.prefix+"."+thread+".*")
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("kvsaver: list thread %q: %w", thread, err)
	}
	slices.Sort(keys)
	slices.Reverse(keys) // ids are zero-padded: newest first
	n := min(len(keys), s.retention)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]graph.Checkpoint, 0, n)
	for _, k := range keys[:n] {
		id := k[strings.LastIndexByte(k, '.')+1:]
		m, err := s.stream.GetLastMsgForSubject(ctx, "$KV."+s.bucket+"."+k)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("kvsaver: read checkpoint %s of thread %q: %w", id, thread, err)
		}
		var cp graph.Checkpoint
		if err := codec.Unmarshal(m.Data, &cp); err != nil {
			return nil, fmt.Errorf("kvsaver: decode %s: %w", m.Subject, err)
		}
		cp.Version = m.Sequence
		out = append(out, cp)
	}
	return out, nil
}

// Delete implements graph.Checkpointer: it purges all the thread's keys.
func (s *Saver) Delete(ctx context.Context, thread string) error {
	if err := checkThread(thread); err != nil {
		return err
	}
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(s.threadSubject(thread))); err != nil {
		return fmt.Errorf("kvsaver: delete thread %q: %w", thread, err)
	}
	return nil
}
