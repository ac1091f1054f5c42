// Package kinds holds the example effector kinds that ea-node hosts (an
// example: the library never imports it): a
// counter and a controller that drives counters (phase 1 of the design
// documents). They show the shape of typed logic and serve the tests and
// benchmarks.
//
// # counter
//
// State {"count": n}. Record type "inc" with optional payload {"by": n}
// (default 1) adds to the count and emits a "count" record {"count": n} on the
// counter's outbox; when the record has EA-Reply the same record answers
// there. Any other type goes to dead letters.
//
// # controller
//
// State {"sent": n}. Record type "start" with payload
// {"counter": "<id>", "times": n} sends n "inc" records to counter/<id> and adds
// n to sent.
package kinds

import (
	"fmt"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// CounterState is the state of a counter.
type CounterState struct {
	Count int64 `json:"count"`
}

// Inc is the payload of an "inc" record.
type Inc struct {
	By *int64 `json:"by,omitempty"`
}

// Count is the payload of the "count" record a counter emits.
type Count struct {
	Count int64 `json:"count"`
}

// Counter returns the counter kind.
func Counter() actor.Kind[CounterState] {
	return actor.Kind[CounterState]{Name: "counter", Logic: countLogic, Types: []string{"inc"}}
}

func countLogic(ctx *actor.Context, s CounterState) (CounterState, error) {
	rec := ctx.Record()
	if rec.Type != "inc" {
		return s, actor.UnknownType(rec.Type)
	}
	var in Inc
	if err := ctx.Decode(&in); err != nil {
		return s, err
	}
	by := int64(1)
	if in.By != nil {
		by = *in.By
	}
	s.Count += by
	if err := ctx.Emit("count", Count{Count: s.Count}); err != nil {
		return s, err
	}
	if rec.Reply != "" {
		if err := ctx.Reply("count", Count{Count: s.Count}); err != nil {
			return s, err
		}
	}
	return s, nil
}

// ControllerState is the state of a controller.
type ControllerState struct {
	Sent int64 `json:"sent"`
}

// Start is the payload of a "start" record.
type Start struct {
	Counter string `json:"counter"`
	Times   int    `json:"times"`
}

// MaxTimes is the most inc records one start record may ask for.
const MaxTimes = 100_000

// Controller returns the controller kind.
func Controller() actor.Kind[ControllerState] {
	return actor.Kind[ControllerState]{Name: "controller", Logic: controlLogic, Types: []string{"start"}}
}

func controlLogic(ctx *actor.Context, s ControllerState) (ControllerState, error) {
	rec := ctx.Record()
	if rec.Type != "start" {
		return s, actor.UnknownType(rec.Type)
	}
	var st Start
	if err := ctx.Decode(&st); err != nil {
		return s, err
	}
	to := records.Ref{Kind: "counter", ID: st.Counter}
	if err := to.Validate(); err != nil {
		return s, actor.Permanent(fmt.Errorf("start: counter: %w", err))
	}
	if st.Times < 1 || st.Times > MaxTimes {
		return s, actor.Permanent(fmt.Errorf("start: times %d: must be 1-%d", st.Times, MaxTimes))
	}
	for range st.Times {
		if err := ctx.Send(to, "inc", nil); err != nil {
			return s, err
		}
	}
	s.Sent += int64(st.Times)
	return s, nil
}
