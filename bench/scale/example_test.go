package scale_test

import (
	"fmt"

	"github.com/effectors/effectors/bench/scale"
)

// The scenarios address counters named by a prefix and a number.
func ExampleCounters() {
	for _, r := range scale.Counters("m", 3) {
		fmt.Println(r)
	}
	// Output:
	// counter/m0
	// counter/m1
	// counter/m2
}
