// Package greeter is a user's own effector kind, built into a node binary of
// its own: cmd/greeter-node is the whole binary,
//
//	func main() { node.Main(greeter.Kind()) }
//
// and it has every flag, EA_* variable, health and metrics endpoint and the
// graceful shutdown of ea-node (see package node). Run it with
//
//	go run ./examples/greeter/cmd/greeter-node --store ./greeter-data
//
// and drive it with the nats CLI:
//
//	nats req ea.ctl.create.greeter '{"id":"g1"}'
//	nats sub 'ea.out.greeter.g1'
//	nats pub ea.mbox.greeter.g1 '{"name":"ada"}' -H EA-Type:greet -H Content-Type:application/json
//
// # The kind
//
// State {"greeted": n}. A "greet" record with payload {"name": "..."} emits
// a "greeting" record {"text": "hello, <name>"} on the greeter's outbox (and
// to EA-Reply, when the record has one) and counts it. Any other record type
// goes to dead letters.
package greeter

import (
	"errors"
	"strings"

	"github.com/effectors/effectors/actor"
)

// KindName is the name of the greeter kind.
const KindName = "greeter"

// State is a greeter's state.
type State struct {
	Greeted int `json:"greeted"`
}

// Greet is the payload of a "greet" record.
type Greet struct {
	Name string `json:"name"`
}

// Greeting is the payload of the "greeting" record a greeter emits.
type Greeting struct {
	Text string `json:"text"`
}

// Kind returns the greeter kind.
func Kind() actor.Kind[State] {
	return actor.Kind[State]{Name: KindName, Logic: greet, Types: []string{"greet"}}
}

func greet(ctx *actor.Context, s State) (State, error) {
	rec := ctx.Record()
	if rec.Type != "greet" {
		return s, actor.UnknownType(rec.Type)
	}
	var in Greet
	if err := ctx.Decode(&in); err != nil {
		return s, err
	}
	if strings.TrimSpace(in.Name) == "" {
		return s, actor.Permanent(errors.New(`greet: name is empty: want {"name": "..."}`))
	}
	out := Greeting{Text: "hello, " + in.Name}
	if err := ctx.Emit("greeting", out); err != nil {
		return s, err
	}
	if rec.Reply != "" {
		if err := ctx.Reply("greeting", out); err != nil {
			return s, err
		}
	}
	s.Greeted++
	return s, nil
}
