package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"time"

	"github.com/effectors/effectors/internal/codec"
)

// START and END are the virtual entry and exit nodes of every graph.
const (
	START = "__start__"
	END   = "__end__"
)

// DefaultRecursionLimit is the number of super-steps one invocation may run.
const DefaultRecursionLimit = 25

// NodeFunc is a node: it reads the state (or, for a node run by a Send, the
// Send's state) and returns an update. An error fails the node (retried under
// its RetryPolicy); Interrupt pauses the graph; a panic becomes a *PanicError.
type NodeFunc[S any] func(ctx context.Context, state S) (Update[S], error)

// Router picks the next node (or END) after a node, reading the state after
// the super-step's updates are applied.
type Router[S any] func(ctx context.Context, state S) (string, error)

// Fanout returns the Sends to run in the next step after a node (a map
// step), reading the state after the super-step's updates are applied.
type Fanout[S any] func(ctx context.Context, state S) ([]Send[S], error)

// Builder collects the nodes, edges and fields of a graph of state S. Its
// methods record mistakes instead of panicking; Compile reports them all.
// A Builder is not safe for concurrent use.
type Builder[S any] struct {
	nodes     map[string]*nodeSpec[S]
	edges     map[string][]string
	routers   map[string][]routerSpec[S]
	fanouts   map[string][]Fanout[S]
	fields    map[string]fieldDef[S]
	fieldList []fieldDef[S]
	stateRed  func(cur, upd S) S
	errs      []error
}

type nodeSpec[S any] struct {
	name  string
	fn    NodeFunc[S]
	retry RetryPolicy
	sub   bool // a subgraph: its checkpoints are in the thread SubgraphThread(task)
	// deferred: runs when nothing else is left (Defer).
	deferred bool
	cache    *CachePolicy

	// A node that takes a Send payload (AddSendNode).
	argFn     func(ctx context.Context, arg any) (Update[S], error)
	argType   reflect.Type
	accepts   func(any) bool
	decodeArg func([]byte) (any, error)
}

type routerSpec[S any] struct {
	route   Router[S]
	targets []string
}

// New returns an empty builder for a graph whose state is S (a struct).
func New[S any]() *Builder[S] {
	return &Builder[S]{
		nodes:   map[string]*nodeSpec[S]{},
		edges:   map[string][]string{},
		routers: map[string][]routerSpec[S]{},
		fanouts: map[string][]Fanout[S]{},
		fields:  map[string]fieldDef[S]{},
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (b *Builder[S]) addField(f fieldDef[S], missing bool) {
	name := f.fieldName()
	switch {
	case missing:
		b.errs = append(b.errs, invalidGraph("field %q: the field pointer function and reducer must not be nil", name))
	case name == "":
		b.errs = append(b.errs, invalidGraph("a field needs a name"))
	case b.fields[name] != nil:
		b.errs = append(b.errs, invalidGraph("field %q declared twice", name))
	default:
		b.fields[name] = f
		b.fieldList = append(b.fieldList, f)
	}
}

// NodeOption configures one node.
type NodeOption func(*nodeOpts) error

type nodeOpts struct {
	retry    RetryPolicy
	deferred bool
	cache    *CachePolicy
}

// Defer makes a node wait until nothing else is left to run (LangGraph's
// defer=True): triggered while other tasks are scheduled, it is carried
// to the following steps and runs once, in the first step where it is all
// that is left (with the other deferred nodes). Use it for the join of
// branches of unequal length. Sends to it run at once.
func Defer() NodeOption {
	return func(o *nodeOpts) error { o.deferred = true; return nil }
}

// WithRetry gives a node a retry policy (default: one attempt).
func WithRetry(p RetryPolicy) NodeOption {
	return func(o *nodeOpts) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		o.retry = p
		return nil
	}
}

// AddNode adds a node. Names are 1–128 of [A-Za-z0-9_-], unique.
func (b *Builder[S]) AddNode(name string, fn NodeFunc[S], opts ...NodeOption) *Builder[S] {
	b.addNode(name, fn, opts)
	return b
}

// AddSendNode adds a node that Sends reach with a payload of type A
// (SendArg) instead of a whole state: the node receives that payload
// (LangGraph's Send(node, arg) to a node whose input schema is arg's). Only
// Sends reach it; an edge or Goto to it is an *InvalidUpdateError, and so is
// a Send whose payload is not an A.
func AddSendNode[S, A any](b *Builder[S], name string, fn func(ctx context.Context, arg A) (Update[S], error), opts ...NodeOption) *Builder[S] {
	if fn == nil {
		b.errs = append(b.errs, invalidGraph("node %q has a nil function", name))
		return b
	}
	spec := b.addNode(name, func(context.Context, S) (Update[S], error) { return Update[S]{}, nil }, opts)
	if spec == nil {
		return b
	}
	spec.argType = reflect.TypeFor[A]()
	spec.accepts = func(v any) bool { _, ok := v.(A); return ok }
	spec.argFn = func(ctx context.Context, v any) (Update[S], error) {
		a, ok := v.(A)
		if !ok {
			return Update[S]{}, Permanent(fmt.Errorf("%w: node %q takes a %s, got %T", ErrInvalidArgument, name, spec.argType, v))
		}
		return fn(ctx, a)
	}
	spec.decodeArg = func(raw []byte) (any, error) {
		var a A
		if err := codec.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		return a, nil
	}
	return b
}

func (b *Builder[S]) addNode(name string, fn NodeFunc[S], opts []NodeOption) *nodeSpec[S] {
	if !nameRE.MatchString(name) {
		b.errs = append(b.errs, invalidGraph("node name %q: use 1-128 letters, digits, - or _", name))
		return nil
	}
	if b.nodes[name] != nil {
		b.errs = append(b.errs, invalidGraph("node %q added twice", name))
		return nil
	}
	if fn == nil {
		b.errs = append(b.errs, invalidGraph("node %q has a nil function", name))
		return nil
	}
	var o nodeOpts
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			b.errs = append(b.errs, fmt.Errorf("node %q: %w", name, err))
		}
	}
	spec := &nodeSpec[S]{name: name, fn: fn, retry: o.retry, deferred: o.deferred, cache: o.cache}
	b.nodes[name] = spec
	return spec
}

// AddEdge adds a static edge: after from runs, to runs in the next
// super-step. from may be START, to may be END. Several edges out of one node
// fan out: their targets run concurrently in the next step.
func (b *Builder[S]) AddEdge(from, to string) *Builder[S] {
	if from == END || to == START {
		b.errs = append(b.errs, invalidGraph("edge %s -> %s: nothing leaves END and nothing enters START", from, to))
		return b
	}
	b.edges[from] = append(b.edges[from], to)
	return b
}

// AddConditionalEdges routes after from with route. When targets are given,
// route must return one of them (checked at run time; they are checked to
// exist at Compile).
func (b *Builder[S]) AddConditionalEdges(from string, route Router[S], targets ...string) *Builder[S] {
	if route == nil {
		b.errs = append(b.errs, invalidGraph("conditional edges from %q: nil router", from))
		return b
	}
	b.routers[from] = append(b.routers[from], routerSpec[S]{route: route, targets: targets})
	return b
}

// AddSends adds a fan-out after from: fan returns Sends, each one run of
// a node in the next step with its own input state (LangGraph's conditional
// edge returning Send objects).
func (b *Builder[S]) AddSends(from string, fan Fanout[S]) *Builder[S] {
	if fan == nil {
		b.errs = append(b.errs, invalidGraph("sends from %q: nil fan-out function", from))
		return b
	}
	b.fanouts[from] = append(b.fanouts[from], fan)
	return b
}

// StateReducer declares the whole-state reducer that Merge updates go
// through, for states whose merge is easiest written as one function.
func (b *Builder[S]) StateReducer(reduce func(cur, upd S) S) *Builder[S] {
	if reduce == nil {
		b.errs = append(b.errs, invalidGraph("nil state reducer"))
		return b
	}
	b.stateRed = reduce
	return b
}

// Option configures a compiled graph.
type Option func(*config) error

type config struct {
	saver      Checkpointer
	limit      int
	logger     *slog.Logger
	now        func() time.Time
	checkStep  bool
	cache      Cache
	durability Durability
	store      Store
	before     map[string]bool // breakpoints before these nodes
	after      map[string]bool // breakpoints after these nodes
}

// WithBreakpoints pauses runs before the steps that would run a node of
// before, and after the steps that ran a node of after (LangGraph's static
// interrupt_before / interrupt_after): the run returns a Result whose
// Breakpoint names the node, its checkpoint holding the next step; Continue
// goes on (without stopping at the same breakpoint again), after an
// UpdateState to edit the state if need be. Breakpoints need a
// checkpointer: hitting one without is ErrNoCheckpointer. Nodes must exist
// (Compile reports unknown ones).
func WithBreakpoints(before, after []string) Option {
	return func(c *config) error {
		c.before, c.after = map[string]bool{}, map[string]bool{}
		for _, n := range before {
			c.before[n] = true
		}
		for _, n := range after {
			c.after[n] = true
		}
		return nil
	}
}

// Durability says when a run's checkpoints are written (LangGraph's
// durability modes).
type Durability uint8

const (
	// DurabilitySync (the default) writes each checkpoint before the next
	// step starts: a crash loses at most the step in progress.
	DurabilitySync Durability = iota
	// DurabilityAsync writes each checkpoint while the next step runs; the
	// run waits for the last one before it returns. A crash may lose the
	// step before the one in progress too.
	DurabilityAsync
	// DurabilityExit writes a checkpoint only when the run ends (END, an
	// interrupt, an error, the recursion limit, a cancelled context): the
	// cheapest, but a crash loses the whole run. Checkpoints that record a
	// failed or paused step, and Resume's input, are always written.
	DurabilityExit
)

// WithDurability sets when checkpoints are written (default
// DurabilitySync).
func WithDurability(d Durability) Option {
	return func(c *config) error {
		if d > DurabilityExit {
			return invalidArg("WithDurability(%d): use DurabilitySync, DurabilityAsync or DurabilityExit", d)
		}
		c.durability = d
		return nil
	}
}

// WithCheckpointer makes every run of the graph checkpoint to cp after every
// super-step; threads, Resume, Continue, State, History and Fork need it.
func WithCheckpointer(cp Checkpointer) Option {
	return func(c *config) error {
		if cp == nil {
			return invalidArg("WithCheckpointer: nil checkpointer")
		}
		c.saver = cp
		return nil
	}
}

// WithRecursionLimit sets how many super-steps one invocation may run
// (default 25); the next one fails the run with a *RecursionError.
func WithRecursionLimit(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalidArg("WithRecursionLimit(%d): the limit must be at least 1", n)
		}
		c.limit = n
		return nil
	}
}

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return invalidArg("WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}

// Compile checks the graph and returns it ready to run. It reports every
// mistake recorded by the builder, edges naming unknown nodes, and a graph
// with no way out of START.
func (b *Builder[S]) Compile(opts ...Option) (*Graph[S], error) {
	errs := append([]error(nil), b.errs...)
	cfg := config{limit: DefaultRecursionLimit, logger: slog.Default(), now: time.Now}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			errs = append(errs, err)
		}
	}
	known := func(n string, to bool) bool {
		if to && n == END {
			return true
		}
		if !to && n == START {
			return true
		}
		return b.nodes[n] != nil
	}
	for from, tos := range b.edges {
		if !known(from, false) {
			errs = append(errs, invalidGraph("edge from unknown node %q; add it with AddNode first", from))
		}
		for _, to := range tos {
			if !known(to, true) {
				errs = append(errs, invalidGraph("edge %s -> %s: unknown node %q", from, to, to))
			}
		}
	}
	for from, rs := range b.routers {
		if !known(from, false) {
			errs = append(errs, invalidGraph("conditional edges from unknown node %q", from))
		}
		for _, r := range rs {
			for _, to := range r.targets {
				if !known(to, true) {
					errs = append(errs, invalidGraph("conditional edge %s -> %s: unknown node %q", from, to, to))
				}
			}
		}
	}
	for from := range b.fanouts {
		if !known(from, false) {
			errs = append(errs, invalidGraph("sends from unknown node %q", from))
		}
	}
	for _, bp := range []map[string]bool{cfg.before, cfg.after} {
		for n := range bp {
			if b.nodes[n] == nil {
				errs = append(errs, invalidGraph("breakpoint at unknown node %q", n))
			}
		}
	}
	if len(b.edges[START]) == 0 && len(b.routers[START]) == 0 && len(b.fanouts[START]) == 0 {
		errs = append(errs, invalidGraph("no edge leaves START; add one with AddEdge(graph.START, \"first-node\")"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.cache == nil {
		for _, n := range b.nodes {
			if n.cache != nil {
				cfg.cache = NewMemoryCache()
				break
			}
		}
	}
	g := &Graph[S]{
		nodes:     maps.Clone(b.nodes),
		edges:     map[string][]string{},
		routers:   map[string][]routerSpec[S]{},
		fanouts:   map[string][]Fanout[S]{},
		fields:    maps.Clone(b.fields),
		fieldList: append([]fieldDef[S](nil), b.fieldList...),
		stateRed:  b.stateRed,
		cfg:       cfg,
	}
	for k, v := range b.edges {
		g.edges[k] = append([]string(nil), v...)
	}
	for k, v := range b.routers {
		g.routers[k] = append([]routerSpec[S](nil), v...)
	}
	for k, v := range b.fanouts {
		g.fanouts[k] = append([]Fanout[S](nil), v...)
	}
	return g, nil
}
