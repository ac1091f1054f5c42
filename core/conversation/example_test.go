package conversation_test

import (
	"fmt"

	"github.com/effectors/effectors/core/conversation"
)

// A branch starts from a thread's history up to a turn.
func ExampleBranchState() {
	s := conversation.State{Count: 3, Turns: []conversation.Turn{
		{N: 1, User: "I am Ada", Assistant: "hello Ada"},
		{N: 2, User: "I like tea", Assistant: "noted"},
		{N: 3, User: "what do I like?", Assistant: "tea"},
	}}
	b, err := conversation.BranchState(s, 1)
	fmt.Println(b.Count, len(b.Turns), b.Turns[0].Assistant, err)
	// The request the branch's next turn makes.
	req := conversation.Request("be kind", b, "what is my name?")
	for _, m := range req.Messages {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	// Output:
	// 1 1 hello Ada <nil>
	// system: be kind
	// user: I am Ada
	// assistant: hello Ada
	// user: what is my name?
}
