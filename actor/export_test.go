package actor

import "github.com/effectors/effectors/records"

// Crash points for tests.
const (
	AfterOutputs = afterOutputs
	AfterState   = afterState
)

// CrashPoint is a processing step at which a test makes the node die.
type CrashPoint = crashPoint

// SetCrash makes the node die where fn says; call before Run.
func (n *Node) SetCrash(fn func(point CrashPoint, ref records.Ref, seq uint64) bool) { n.crash = fn }
