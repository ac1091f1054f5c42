package actor

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/kv"
	"github.com/effectors/effectors/records"
	"github.com/vmihailenco/msgpack/v5"
)

// State versions.
//
// A kind's state type changes over time. [Kind].Version numbers it (1 when
// unset) and every state document records the version its state was
// written with (Document.Version, key "version", absent for 1). When an
// effector's document is loaded:
//
//   - at the kind's version: used as it is;
//   - older: the state is taken through [Kind].Upgrades, one step per
//     version, in memory; the next state write stores it at the new
//     version (until then the stored document stays as it was, so a crash
//     in between loses nothing: the next load upgrades it again);
//   - newer (a node of an older version meets a document a newer one
//     wrote, during a rolling upgrade): refused. The effector's records
//     wait, held and unacknowledged (the watchdog keeps them from being
//     redelivered), neither applied nor dead-lettered, and the document is
//     never written. A WARN log and ea_state_version_refusals_total{kind}
//     say why. The node looks at the document again after 1s, 2s, 4s...
//     up to every 30s (a reset or terminate resolves it too); when a node
//     of the newer version takes the partition, it processes them.
//
// An upgrade that fails (an error, a panic, a state that does not decode
// into the step's old type, a document older than the oldest step) is
// handled the same way as a newer document: the records wait, with an ERROR
// log and ea_state_upgrade_failures_total{kind}. Not dead letters: the fault
// is in code the operator deploys, not in the records, and every one of the
// effector's records would go to dead letters out of order for it; waiting
// loses nothing, and a fixed binary (or a reset of the document) lets them
// through in order.

// maxStateVersion bounds Kind.Version and a document's version.
const maxStateVersion = math.MaxInt32

// Waits between looks at a document this node cannot use yet.
const (
	versionWaitFirst = time.Second
	versionWaitMax   = 30 * time.Second
)

// ErrStateVersion: a state document cannot be used by this node's version of
// its kind: it was written by a newer version, or upgrading it failed. The
// error is a [*StateVersionError].
var ErrStateVersion = errors.New("state version")

// StateVersionError says why a state document cannot be used at this
// node's version of its kind. It matches [ErrStateVersion].
type StateVersionError struct {
	// Ref is the effector.
	Ref records.Ref
	// Have is the document's state version, Want the kind's.
	Have, Want int
	// Err is the upgrade's failure; nil when the document is newer.
	Err error
}

func (e *StateVersionError) Error() string {
	what := "the state of " + e.Ref.String()
	if e.Ref.ID == "" { // Kind.UpgradeState: no effector
		what = "a state of kind " + e.Ref.Kind
	}
	if e.Err == nil {
		return fmt.Sprintf("%s is at version %d, newer than this node's kind (version %d): a node of version %d or later must process it; its records wait",
			what, e.Have, e.Want, e.Have)
	}
	return fmt.Sprintf("upgrade %s from version %d to %d: %v", what, e.Have, e.Want, e.Err)
}

// Unwrap returns the upgrade's failure.
func (e *StateVersionError) Unwrap() error { return e.Err }

// Is reports whether target is ErrStateVersion.
func (e *StateVersionError) Is(target error) bool { return target == ErrStateVersion }

// Upgrade is one step of a kind's state history: it turns a state of
// version From into one of version From+1. Make one with [UpgradeFrom].
type Upgrade struct {
	// From is the version the step starts from.
	From int
	fn   func(old []byte) ([]byte, error)
}

// UpgradeFrom returns the step from state version from to from+1: fn takes
// the state as it was stored at version from, decoded into Old, and returns
// it at the next version. Old and New name fields by their json tags, as a
// kind's state type does; New of the last step is the kind's state type,
// and Old of each step the New of the one before. fn must be deterministic
// and should not block: a node runs it when it loads the document, and
// again after a crash before the upgraded state was written. An error from
// fn makes the effector's records wait (see [Kind].Upgrades).
func UpgradeFrom[Old, New any](from int, fn func(Old) (New, error)) Upgrade {
	if fn == nil {
		return Upgrade{From: from}
	}
	return Upgrade{From: from, fn: func(b []byte) ([]byte, error) {
		var old Old
		if len(b) > 0 {
			if err := codec.Unmarshal(b, &old); err != nil {
				return nil, fmt.Errorf("the state does not decode into %T: %w", old, err)
			}
		}
		next, err := fn(old)
		if err != nil {
			return nil, err
		}
		out, err := codec.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", next, err)
		}
		return out, nil
	}}
}

// versions is the state version of a kind and its upgrade steps.
type versions struct {
	version int
	steps   map[int]func([]byte) ([]byte, error) // by From
	oldest  int                                  // the lowest From; version when none
}

// newVersions checks a kind's Version and Upgrades: Version 0 is 1, and the
// steps must be one per version, contiguous, ending at version-1, at least
// that one when version is above 1.
func newVersions(kind string, version int, ups []Upgrade) (versions, error) {
	if version == 0 {
		version = 1
	}
	if version < 1 || version > maxStateVersion {
		return versions{}, invalidf("kind %s: Version %d must be between 1 and %d (0 means 1)", kind, version, maxStateVersion)
	}
	v := versions{version: version, oldest: version, steps: make(map[int]func([]byte) ([]byte, error), len(ups))}
	for _, u := range ups {
		switch {
		case u.fn == nil:
			return versions{}, invalidf("kind %s: the upgrade from version %d has no function: make it with actor.UpgradeFrom and a non-nil function", kind, u.From)
		case u.From < 1 || u.From >= version:
			return versions{}, invalidf("kind %s: an upgrade from version %d: upgrades go from 1 up to Version-1 (%d)", kind, u.From, version-1)
		case v.steps[u.From] != nil:
			return versions{}, invalidf("kind %s: two upgrades from version %d", kind, u.From)
		}
		v.steps[u.From] = u.fn
		v.oldest = min(v.oldest, u.From)
	}
	if version > 1 && v.steps[version-1] == nil {
		return versions{}, invalidf("kind %s: Version %d needs an upgrade from version %d (actor.UpgradeFrom(%d, ...)): documents written before would not load", kind, version, version-1, version-1)
	}
	if missing := v.missing(); missing != 0 {
		return versions{}, invalidf("kind %s: the upgrades skip version %d: give one step from each version between %d and %d", kind, missing, v.oldest, version-1)
	}
	return v, nil
}

// stamp is the Version of a document written at the kind's version: 0 for
// 1, so that the key is left out.
func (v versions) stamp() int {
	if v.version == 1 {
		return 0
	}
	return v.version
}

// missing returns a version between oldest and version-1 without a step, 0
// when none.
func (v versions) missing() int {
	froms := make([]int, 0, len(v.steps))
	for f := range v.steps {
		froms = append(froms, f)
	}
	slices.Sort(froms)
	for i, f := range froms {
		if f != v.oldest+i {
			return v.oldest + i
		}
	}
	return 0
}

// upgrade takes state, stored at version from, up to the kind's version.
// The error (a *StateVersionError) says which step failed and why.
func (v versions) upgrade(ref records.Ref, state []byte, from int) ([]byte, error) {
	fail := func(err error) error { return &StateVersionError{Ref: ref, Have: from, Want: v.version, Err: err} }
	if from > v.version {
		return nil, &StateVersionError{Ref: ref, Have: from, Want: v.version}
	}
	if from < v.oldest {
		return nil, fail(fmt.Errorf("kind %s has no upgrade from version %d (its oldest is from version %d)", ref.Kind, from, v.oldest))
	}
	for at := from; at < v.version; at++ {
		next, err := runStep(v.steps[at], state)
		if err != nil {
			return nil, fail(fmt.Errorf("step from version %d to %d: %w", at, at+1, err))
		}
		state = next
	}
	return state, nil
}

// runStep runs one upgrade step, a panic becoming an error.
func runStep(fn func([]byte) ([]byte, error), state []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("panicked: %v", p)
		}
	}()
	return fn(state)
}

// UpgradeState takes old, a state of version from (a value of that
// version's state type, or its msgpack as a msgpack.RawMessage), through
// k.Upgrades to the kind's state type: what a node does to a document of
// that version when it loads it. For tests of a kind's upgrades. The error
// matches [ErrStateVersion] when from is newer than the kind or a step
// fails, and [ErrInvalid] when the kind is not valid.
func (k Kind[S]) UpgradeState(from int, old any) (S, error) {
	var next S
	v, err := newVersions(k.Name, k.Version, k.Upgrades)
	if err != nil {
		return next, err
	}
	var b []byte
	if raw, ok := old.(msgpack.RawMessage); ok {
		b = raw
	} else if b, err = codec.Marshal(old); err != nil {
		return next, fmt.Errorf("encode the old state %T: %w", old, err)
	}
	ref := records.Ref{Kind: k.Name}
	if b, err = v.upgrade(ref, b, max(from, 1)); err != nil {
		return next, err
	}
	if err := codec.Unmarshal(b, &next); err != nil {
		return next, &StateVersionError{Ref: ref, Have: from, Want: v.version, Err: fmt.Errorf("the upgraded state does not decode into %T: %w", next, err)}
	}
	return next, nil
}

// decodeVersion reads the "version" of a state document: an integer from 0
// (meaning 1) to maxStateVersion.
func decodeVersion(dec *msgpack.Decoder) (int, error) {
	v, err := dec.DecodeInt64()
	if err != nil {
		return 0, err
	}
	if v < 0 || v > maxStateVersion {
		return 0, fmt.Errorf("%d is not a state version (1 to %d)", v, maxStateVersion)
	}
	return int(v), nil
}

// fitVersion brings the document just loaded to the kind's state version:
// as it is, or upgraded in memory (written at the next state write), and
// reports true. When it cannot (a newer document, a failed upgrade) and
// no record is held (an activation), it reports false at once; else the
// records held wait: it logs why, then reads the document again from time to
// time, until it can use it (true), or the effector stops, or the document
// is gone, corrupt or terminated meanwhile (false: the document is marked
// stale, and load reads it again and deals with it). The drain goroutine
// stays in here while it waits, so the stall watch sees the effector
// stalled.
func (e *effector) fitVersion() bool {
	var since time.Time
	wait := versionWaitFirst
	for {
		why := e.upgradeDoc()
		if why == nil {
			if !since.IsZero() {
				e.logger().Info("state document usable again; processing its records", "waited", time.Since(since).Round(time.Millisecond))
			}
			return true
		}
		have, want := e.doc.StateVersion(), e.kind.versions.version
		if since.IsZero() {
			held := e.backlog()
			if held == 0 { // loaded by an activation: nothing waits yet
				e.stale.Store(true)
				return false
			}
			since = time.Now()
			if have > want {
				e.node.metrics.versions.refusals.WithLabelValues(e.ref.Kind).Inc()
				e.logger().Warn("state document written by a newer version of the kind: not processing its records here; they wait for a node of that version",
					"state_version", have, "kind_version", want, "held", held, "err", why)
			} else {
				e.node.metrics.versions.failures.WithLabelValues(e.ref.Kind).Inc()
				e.logger().Error("state upgrade failed: the effector's records wait until a node with a working upgrade takes its partition, or its state is reset",
					"state_version", have, "kind_version", want, "held", held, "err", why)
			}
		} else {
			e.logger().Debug("state document still not usable at this version", "err", why, "waiting", time.Since(since).Round(time.Second))
		}
		if !e.pause(wait) {
			e.abandonHeld()
			return false
		}
		wait = min(2*wait, versionWaitMax)
		ent, err := e.node.loadState(e.ctx, e.ref)
		switch {
		case err == nil && ent.Value.Status != StatusTerminated:
			e.doc, e.rev, e.found = ent.Value, ent.Revision, ent.Value
		case err == nil, errors.Is(err, kv.ErrNotFound), errors.Is(err, ErrCorruptState):
			e.stale.Store(true) // terminated, gone or corrupt: load deals with it
			return false
		default:
			e.logger().Debug("reading the state document again failed; waiting on", "err", err)
		}
	}
}

// upgradeDoc brings e.doc to the kind's state version in memory, or returns
// why it cannot (a *StateVersionError).
func (e *effector) upgradeDoc() error {
	have, want := e.doc.StateVersion(), e.kind.versions.version
	if have == want {
		return nil
	}
	state, err := e.kind.versions.upgrade(e.ref, e.doc.State, have)
	if err != nil {
		return err
	}
	e.doc.State, e.doc.Version = state, want
	e.node.metrics.versions.upgrades.WithLabelValues(e.ref.Kind).Inc()
	e.logger().Debug("state document upgraded in memory; written at the next state write", "from", have, "to", want)
	return nil
}

// pause waits for d, and reports false when the effector stops first.
func (e *effector) pause(d time.Duration) bool {
	const step = 100 * time.Millisecond
	for end := time.Now().Add(d); ; {
		e.mu.Lock()
		stopped := e.stopped
		e.mu.Unlock()
		left := time.Until(end)
		if stopped || e.ctx.Err() != nil {
			return false
		}
		if left <= 0 {
			return true
		}
		if !sleep(e.ctx, min(left, step)) {
			return false
		}
	}
}
