package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RawConfig sizes the Raw scenario.
type RawConfig struct {
	// Sizes are the numbers of consumers measured one after the other.
	Sizes []int
	// Records is how many records each run publishes.
	Records int
	// Streams, when above 0, spreads the consumers over that many streams
	// of their own (SCALE_RAW_<i>, subjects scaleraw.<i>.>), file storage,
	// one replica, instead of the records stream: consumer j filters
	// scaleraw.<j mod Streams>.<id>.
	Streams int
}

// Raw measures what the NATS server alone makes of many per-effector
// consumers, without the runtime: for each size n it creates n durable pull
// consumers as the runtime does (memory storage, one replica, filtered on one
// mailbox subject, explicit ack, 64 pending), consumes them with nats.go in
// this process, acknowledging each record and doing nothing else, publishes
// Records records round-robin into the n mailboxes and reports the rate of
// acknowledged records. The server runs in its own process.
func Raw(ctx context.Context, env Env, cfg RawConfig) error {
	if err := env.validate(); err != nil {
		return err
	}
	if len(cfg.Sizes) == 0 || cfg.Records < 1 || cfg.Streams < 0 {
		return fmt.Errorf("%w: RawConfig %+v: need sizes and records", ErrInvalid, cfg)
	}
	env.printf("## raw: nats.go consumers that only acknowledge, %d records per run, streams %d (0: the records stream)", cfg.Records, cfg.Streams)
	srv, conn, err := startServer(ctx, env, filepath.Join(env.Dir, "raw"))
	if err != nil {
		return err
	}
	defer func() { _ = srv.Kill() }() // a throw-away store: no need to wait for a graceful stop
	defer func() { _ = conn.Close() }()
	recordStream, err := conn.MailboxStream(ctx)
	if err != nil {
		return err
	}
	streams := []jetstream.Stream{recordStream}
	if cfg.Streams > 0 {
		streams = streams[:0]
		for i := range cfg.Streams {
			st, err := conn.JetStream().CreateStream(ctx, jetstream.StreamConfig{
				Name: fmt.Sprint("SCALE_RAW_", i), Subjects: []string{fmt.Sprintf("scaleraw.%d.>", i)},
				Storage: jetstream.FileStorage, Replicas: 1,
			})
			if err != nil {
				return fmt.Errorf("create stream %d: %w", i, err)
			}
			streams = append(streams, st)
		}
	}
	for run, n := range cfg.Sizes {
		if n < 1 || n > cfg.Records {
			return fmt.Errorf("%w: size %d: must be between 1 and Records", ErrInvalid, n)
		}
		kind := fmt.Sprint("raw", run)
		// subject returns where record j is published and the consumer's
		// filter: a mailbox is stored under its partition.
		subject := func(j int, id string) (string, string) {
			if cfg.Streams == 0 {
				r := records.Ref{Kind: kind, ID: id}
				return conn.Names().Mailbox(r), conn.Names().StoredMailbox(r)
			}
			s := fmt.Sprintf("scaleraw.%d.%s.%s", j%cfg.Streams, kind, id)
			return s, s
		}
		if err := rawRun(ctx, env, conn, streams, kind, subject, n, cfg.Records, srv); err != nil {
			return err
		}
	}
	return nil
}

func rawRun(ctx context.Context, env Env, conn *bus.Conn, streams []jetstream.Stream, kind string, subject func(j int, id string) (string, string), n, total int, srv *Proc) error {
	subjects := make([]string, n)
	var acked atomic.Int64
	var tenth atomic.Int64 // unix nanos when a tenth was acknowledged
	var ccs []jetstream.ConsumeContext
	defer func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}()
	t0 := time.Now()
	for i := range subjects {
		id := fmt.Sprint("r", i)
		var filter string
		subjects[i], filter = subject(i, id)
		cons, err := streams[i%len(streams)].CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: kind + "_" + id, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 64, MemoryStorage: true, Replicas: 1,
		})
		if err != nil {
			return fmt.Errorf("consumer %d: %w", i, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if m.Ack() == nil && acked.Add(1) == int64(total/10) {
				tenth.Store(time.Now().UnixNano())
			}
		}, jetstream.PullMaxMessages(64))
		if err != nil {
			return fmt.Errorf("consume %d: %w", i, err)
		}
		ccs = append(ccs, cc)
	}
	env.printf("  %d consumers created and consuming in %.2fs", n, time.Since(t0).Seconds())
	t0 = time.Now()
	err := publishAll(ctx, conn, 4096, total, func(i int) (*nats.Msg, error) {
		rec, err := records.New("inc", nil)
		if err != nil {
			return nil, err
		}
		return rec.Msg(subjects[i%n]), nil
	})
	if err != nil {
		return err
	}
	published := time.Since(t0)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for acked.Load() < int64(total) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("acknowledged %d of %d: %w", acked.Load(), total, ctx.Err())
		case <-tick.C:
		}
	}
	end := time.Now()
	rate := float64(total-total/10) / end.Sub(time.Unix(0, tenth.Load())).Seconds()
	r, _, _ := srv.RSS()
	env.printf("  %d consumers: %d records in %.2fs (published in %.2fs): %.0f records/s steady; server RSS %s",
		n, total, end.Sub(t0).Seconds(), published.Seconds(), rate, mib(r))
	return nil
}
