package actor

import (
	"fmt"
	"strings"

	"github.com/effectors/effectors/records"
)

// Crash points for tests.
const (
	AfterOutputs = afterOutputs
	AfterState   = afterState
)

// CrashPoint is a processing step at which a test makes the node die.
type CrashPoint = crashPoint

// SetCrash makes the node die where fn says; call before Run.
func (n *Node) SetCrash(fn func(point CrashPoint, ref records.Ref, seq uint64) bool) { n.crash = fn }

// SetOwner overrides placement's owner where fn returns true; call before Run.
func (n *Node) SetOwner(fn func(ref records.Ref) (string, bool)) { n.ownerHook = fn }

// Debug describes what the node drives and the markers it knows.
func (n *Node) Debug() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s drives:", n.ID())
	for _, e := range n.driven() {
		e.mu.Lock()
		fmt.Fprintf(&b, " %s(held %d pending %d running %v stopped %v seq %d)", e.ref, len(e.held), e.pending, e.running, e.stopped, e.doc.Seq)
		e.mu.Unlock()
	}
	n.place.mu.Lock()
	fmt.Fprintf(&b, "; markers:")
	for r, m := range n.place.markers {
		fmt.Fprintf(&b, " %s=%s@%d", r, m.node, m.rev)
	}
	fmt.Fprintf(&b, "; pos %d", n.place.pos.Load())
	n.place.mu.Unlock()
	return b.String()
}
