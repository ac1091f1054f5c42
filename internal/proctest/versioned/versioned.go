// Package versioned is one kind, "tally", at two state versions, for a
// rolling-upgrade test that runs a node binary of each (./v1, ./v2) against
// one NATS server: version 1 counts records in "n", version 2 in "count",
// with the upgrade from 1 to 2. A version 1 state decodes into version 2's
// type without an error, with count 0: the loss a state version prevents.
package versioned

import "github.com/effectors/effectors/actor"

// Name is the kind's name.
const Name = "tally"

// StateV1 is the state at version 1.
type StateV1 struct {
	N int `json:"n"`
}

// StateV2 is the state at version 2.
type StateV2 struct {
	Count int `json:"count"`
}

// V1 is the kind at state version 1: every record adds one to N.
func V1() actor.Kind[StateV1] {
	return actor.Kind[StateV1]{
		Name: Name,
		Logic: func(_ *actor.Context, s StateV1) (StateV1, error) {
			s.N++
			return s, nil
		},
	}
}

// V2 is the kind at state version 2: every record adds one to Count.
func V2() actor.Kind[StateV2] {
	return actor.Kind[StateV2]{
		Name:    Name,
		Version: 2,
		Upgrades: []actor.Upgrade{
			actor.UpgradeFrom(1, func(old StateV1) (StateV2, error) { return StateV2{Count: old.N}, nil }),
		},
		Logic: func(_ *actor.Context, s StateV2) (StateV2, error) {
			s.Count++
			return s, nil
		},
	}
}
