package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/service"
)

// Service operations: the endpoints <prefix>.store.<op>.
const (
	OpGet       = "get"
	OpQuery     = "query"
	OpCount     = "count"
	OpKinds     = "kinds"
	OpEffectors = "effectors"
	// OpOrchestrations lists orchestrations.
	OpOrchestrations = "orchestrations"
)

// ServerOptions configures a [Server].
type ServerOptions struct {
	// Logger receives indexer problems. Default slog.Default().
	Logger *slog.Logger
	// NoIndexer serves queries without running the indexer (another server
	// runs it).
	NoIndexer bool
	// Concurrency bounds the requests answered at once. Default 16.
	Concurrency int
}

// Server runs the indexer and answers the store service
// (<prefix>.store.get, .query, .count, .kinds, .effectors, .orchestrations: JSON
// request-reply, a NATS micro service named <prefix>_store in queue group
// "q", so several servers share the load).
type Server struct {
	client *Client
	ix     *indexer
	opts   ServerOptions
}

// NewServer returns a server on conn, which must be provisioned.
func NewServer(ctx context.Context, conn *bus.Conn, opts ServerOptions) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 16
	}
	if opts.Concurrency < 0 {
		return nil, invalidf("concurrency %d: must be positive", opts.Concurrency)
	}
	c, err := NewClient(ctx, conn)
	if err != nil {
		return nil, err
	}
	// The indexer's own JetStream context: its asynchronous publishes do not
	// share a pending window with the caller's.
	js, err := jetstream.New(conn.NATS(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Server{client: c, ix: &indexer{js: js, n: c.n, log: opts.Logger, batched: c.batched}, opts: opts}, nil
}

// Client returns the server's client.
func (s *Server) Client() *Client { return s.client }

// Run indexes and serves until ctx ends, then stops the service, waits for
// the requests in hand and returns nil (or the first failure to start).
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !s.opts.NoIndexer {
		wg.Go(func() {
			if err := s.ix.run(ctx); err != nil {
				s.opts.Logger.Error("record store indexer stopped", "err", err)
			}
		})
	}
	n := s.client.n
	svc, err := micro.AddService(s.client.conn.NATS(), micro.Config{
		Name:        n.service(),
		Version:     "0.1.0",
		Description: "effectors record store: get, query and count records; list kinds, effectors and orchestrations",
	})
	if err != nil {
		return fmt.Errorf("start store service: %w", err)
	}
	sem := make(chan struct{}, s.opts.Concurrency)
	// Requests run on their own goroutines, tracked by reqs; closed (under
	// mu) stops new ones before Run waits for reqs.
	var (
		mu     sync.Mutex
		closed bool
		reqs   sync.WaitGroup
	)
	handle := func(fn func(context.Context, []byte) (any, error)) micro.Handler {
		return micro.HandlerFunc(func(req micro.Request) {
			mu.Lock()
			if closed {
				mu.Unlock()
				h := errorHeader(&ServiceError{Code: 503, Kind: "unavailable", Message: "store server stopping"})
				_ = req.Error(h.Get(service.HeaderCode), h.Get(service.HeaderError), nil, micro.WithHeaders(micro.Headers(h)))
				return
			}
			reqs.Add(1)
			mu.Unlock()
			go func() {
				defer reqs.Done()
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-sem }()
				rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
				defer rcancel()
				v, err := fn(rctx, req.Data())
				// Answered on the request's reply subject directly: the micro
				// library reads a request's error after its handler returns,
				// so answering through it from this goroutine would race.
				if err != nil {
					s.answer(req.Reply(), nil, err)
					return
				}
				body, err := json.Marshal(v)
				s.answer(req.Reply(), body, err)
			}()
		})
	}
	defer func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		reqs.Wait()
	}()
	endpoints := map[string]func(context.Context, []byte) (any, error){
		OpGet:            s.get,
		OpQuery:          s.query,
		OpCount:          s.count,
		OpKinds:          s.kinds,
		OpEffectors:      s.effectors,
		OpOrchestrations: s.orchestrations,
	}
	for op, fn := range endpoints {
		if err := svc.AddEndpoint(op, handle(fn), micro.WithEndpointSubject(n.subject(op)),
			micro.WithEndpointMetadata(map[string]string{"format": "application/json"})); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("add store endpoint %s: %w", op, err)
		}
	}
	<-ctx.Done()
	_ = svc.Stop()
	return nil
}

func (s *Server) get(ctx context.Context, data []byte) (any, error) {
	var r GetRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	rec, err := s.client.Get(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	return rec.JSON(), nil
}

func (s *Server) query(ctx context.Context, data []byte) (any, error) {
	q, err := DecodeQueryRequest(data)
	if err != nil {
		return nil, err
	}
	p, err := s.client.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := PageJSON{Records: make([]RecordJSON, len(p.Records)), Cursor: p.Cursor, More: p.More}
	for i, r := range p.Records {
		out.Records[i] = r.JSON()
	}
	return out, nil
}

func (s *Server) count(ctx context.Context, data []byte) (any, error) {
	q, err := DecodeQueryRequest(data)
	if err != nil {
		return nil, err
	}
	n, err := s.client.Count(ctx, q)
	if err != nil {
		return nil, err
	}
	return CountJSON{Count: n}, nil
}

// KindsJSON is the JSON reply of <prefix>.store.kinds.
type KindsJSON struct {
	Kinds []Kind `json:"kinds"`
}

func (s *Server) kinds(ctx context.Context, data []byte) (any, error) {
	if err := decodeStrict(data, &struct{}{}); err != nil {
		return nil, err
	}
	k, err := s.client.Kinds(ctx)
	if err != nil {
		return nil, err
	}
	return KindsJSON{Kinds: k}, nil
}

// EffectorsRequest is the JSON body of <prefix>.store.effectors.
type EffectorsRequest struct {
	Kind   string `json:"kind"`
	Status string `json:"status,omitempty"`
	Owner  string `json:"owner,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// EffectorsJSON is the JSON reply of <prefix>.store.effectors.
type EffectorsJSON struct {
	Effectors []Effector `json:"effectors"`
	Cursor    string     `json:"cursor"`
	More      bool       `json:"more"`
}

func (s *Server) effectors(ctx context.Context, data []byte) (any, error) {
	var r EffectorsRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	p, err := s.client.Effectors(ctx, EffectorQuery{Kind: r.Kind, Status: actorStatus(r.Status), Owner: r.Owner, Limit: r.Limit, Cursor: r.Cursor})
	if err != nil {
		return nil, err
	}
	return EffectorsJSON{Effectors: p.Effectors, Cursor: p.Cursor, More: p.More}, nil
}

// OrchestrationsRequest is the JSON body of <prefix>.store.orchestrations.
type OrchestrationsRequest struct {
	Status string `json:"status,omitempty"`
	Name   string `json:"name,omitempty"`
	Owner  string `json:"owner,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// OrchestrationsJSON is the JSON reply of <prefix>.store.orchestrations.
type OrchestrationsJSON struct {
	Orchestrations []Orchestration `json:"orchestrations"`
	Cursor         string          `json:"cursor"`
	More           bool            `json:"more"`
}

func (r OrchestrationsRequest) query() OrchQuery {
	return OrchQuery{Status: r.Status, Name: r.Name, Owner: r.Owner, Limit: r.Limit, Cursor: r.Cursor}
}

func (s *Server) orchestrations(ctx context.Context, data []byte) (any, error) {
	var r OrchestrationsRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	p, err := s.client.Orchestrations(ctx, r.query())
	if err != nil {
		return nil, err
	}
	if p.Orchestrations == nil {
		p.Orchestrations = []Orchestration{}
	}
	return OrchestrationsJSON{Orchestrations: p.Orchestrations, Cursor: p.Cursor, More: p.More}, nil
}

// answer replies to a request on its reply subject: body, or the error in
// the headers of the shared table (Nats-Service-Error,
// Nats-Service-Error-Code, EA-Error-Reason) and [HeaderKind].
func (s *Server) answer(reply string, body []byte, err error) {
	if reply == "" {
		return
	}
	msg := nats.NewMsg(reply)
	if err != nil {
		msg.Header = errorHeader(err)
	} else {
		msg.Data = body
	}
	_ = s.client.conn.NATS().PublishMsg(msg)
}
