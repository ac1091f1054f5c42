package actor_test

import (
	"errors"
	"fmt"

	"github.com/effectors/effectors/actor"
)

// A kind whose state type changed: version 1 counted in "n", version 2 in
// "count". A node hosting it upgrades a version 1 document when it loads it;
// UpgradeState runs the same steps in a test.
func ExampleUpgradeFrom() {
	type TallyV1 struct {
		N int `json:"n"`
	}
	type Tally struct {
		Count int `json:"count"`
	}
	tally := actor.Kind[Tally]{
		Name:    "tally",
		Version: 2,
		Upgrades: []actor.Upgrade{
			actor.UpgradeFrom(1, func(old TallyV1) (Tally, error) { return Tally{Count: old.N}, nil }),
		},
		Logic: func(_ *actor.Context, s Tally) (Tally, error) { s.Count++; return s, nil },
	}
	s, err := tally.UpgradeState(1, TallyV1{N: 5})
	fmt.Println(s.Count, err)
	_, err = tally.UpgradeState(3, Tally{}) // written by a newer version
	fmt.Println(errors.Is(err, actor.ErrStateVersion))
	fmt.Println(err)
	// Output:
	// 5 <nil>
	// true
	// a state of kind tally is at version 3, newer than this node's kind (version 2): a node of version 3 or later must process it; its records wait
}
