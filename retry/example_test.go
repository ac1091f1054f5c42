package retry_test

import (
	"errors"
	"fmt"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/graph"
	"github.com/effectors/effectors/retry"
)

// One mark: an error marked by one package is permanent to the others.
func ExamplePermanent() {
	err := fmt.Errorf("node: %w", graph.Permanent(errors.New("bad input")))
	fmt.Println(actor.IsPermanent(err), graph.IsPermanent(err), retry.IsPermanent(err))
	// Output: true true true
}

// A policy's zero fields take a package's defaults; Delay is the wait after
// a failed attempt.
func ExamplePolicy_Delay() {
	p := retry.Policy{Attempts: 3}.Or(retry.Default())
	fmt.Println(p.Attempts, p.Delay(1), p.Delay(2), p.Delay(10))
	// Output: 3 100ms 200ms 5s
}
