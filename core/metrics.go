package core

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what the agent services use. Make one with [NewMetrics] and
// set it on [Services]; a nil *Metrics counts nothing.
//
//	ea_llm_tokens_total{kind, direction}  tokens of LLM requests made through
//	                                      a kind's Scope; direction is
//	                                      "input" (prompt) or "output" (completion)
type Metrics struct {
	tokens *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg (nil: not registered, still
// counted). Registering twice on one registry reuses the first collector, so
// every Services of a process may call it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	tokens := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ea_llm_tokens_total",
		Help: "Tokens of LLM requests made through a kind's agent services, by direction (input, output).",
	}, []string{"kind", "direction"})
	if reg != nil {
		if err := reg.Register(tokens); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, Errorf(CodeInvalid, "core.metrics", "register: %w", err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, Errorf(CodeInvalid, "core.metrics", "ea_llm_tokens_total is registered with another type")
			}
			tokens = existing
		}
	}
	return &Metrics{tokens: tokens}, nil
}

// count adds u to kind's token counters.
func (m *Metrics) count(kind string, u Usage) {
	if m == nil {
		return
	}
	if u.Input > 0 {
		m.tokens.WithLabelValues(kind, "input").Add(float64(u.Input))
	}
	if u.Output > 0 {
		m.tokens.WithLabelValues(kind, "output").Add(float64(u.Output))
	}
}

// Tally sums the token usage of the requests made with a context that
// carries it ([WithTally]): [Wrap] gives each record's logic one, so the usage
// of one record is known when its logic returns. Safe for concurrent use.
type Tally struct {
	mu sync.Mutex
	u  Usage
}

// Add adds u.
func (t *Tally) Add(u Usage) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.u = t.u.Add(u)
}

// Usage returns the sum so far.
func (t *Tally) Usage() Usage {
	if t == nil {
		return Usage{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.u
}

type tallyKey struct{}

// WithTally returns ctx carrying t: the usage of requests made through a
// [Scope] with the returned context (or one derived from it) is added to t.
func WithTally(ctx context.Context, t *Tally) context.Context {
	return context.WithValue(ctx, tallyKey{}, t)
}

// TallyOf returns the tally ctx carries, or nil.
func TallyOf(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
}

// TokenCounter returns the counter of kind's tokens in direction ("input"
// or "output"), for tests and dashboards built in Go.
func TokenCounter(m *Metrics, kind, direction string) prometheus.Counter {
	return m.tokens.WithLabelValues(kind, direction)
}
