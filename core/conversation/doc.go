// Package conversation is a conversational effector kind: a thread whose
// state is its message history, so that each "message" record is one turn
// with memory.
//
// # Turns
//
// A "message" record (payload [Message], {"text": "..."}) is one turn: the
// kind asks the LLM with the system prompt, the summary of older turns, the
// turns kept and the new text, streams the answer on its outbox
// ("message.chunk" records, published at once), then emits a "reply" record
// ([Reply]) and, when the message has an EA-Reply (a supervisor's Call),
// answers there with a "result" record holding the same [Reply]. The turn
// and its answer are appended to the state in the same step.
//
// # Bounded history
//
// The history is bounded ([Config].MaxTurns): when it grows past the limit,
// the oldest turns but [Config].Keep are folded into State.Summary by the
// summarising policy ([Config].Summarize; by default the LLM is asked to
// summarise them with [SummaryPrompt]) and dropped.
//
// # Threads
//
// [Create], [Send], [Branch] and [Kill] drive threads from any process with
// an actor.Client — a supervisor's orchestration included (its nodes get the
// supervisor's client from supervisor.ActorClient): Branch creates a new
// thread whose history is a copy of another's up to a turn, Kill terminates
// a thread.
package conversation
