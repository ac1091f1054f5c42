// Package task runs agents in the background and collects their streamed
// output into one result (the seed's "startBackgroundTask").
//
// # Agents
//
// An [Agent] starts a run from an input, a [Start] (session, workspace) and
// [Sinks] for text chunks, events, completion and failure, and returns a
// [Handle] with Cancel and the session id. [LLMAgent] streams an LLM's
// answer; [ToolAgent] runs the tool-call loop, streaming its text and
// reporting an event per tool call, approval, decision and result; [Remote]
// runs an agent hosted by an effector on another node. Agents report their
// token usage with an [EventUsage] event; Collect sums it in Result.Usage.
//
// # Tool approvals
//
// A ToolAgent's CanUseTool hook may ask about a call. The host answers
// through Sinks.Ask: [Approve] for Collect (from Go), task.approve records
// sent to the effector's mailbox when it is hosted by [Kind] with
// [ApproveByRecords] (over NATS, from any client), or the asker of the
// caller of a [Remote] run, which Remote turns into such a record.
//
// # Collecting
//
// [Collect] starts a run and waits for exactly one outcome: completed (the
// result), failed, timed out or cancelled (the result so far, marked Partial,
// with a *core.Error of code failed, timeout or cancelled). On timeout and
// cancellation it cancels the run and waits (up to a grace period) until the
// agent reports that it stopped, so the underlying work — the LLM's HTTP
// stream — is really closed when Collect returns.
//
// # Remote runs over NATS
//
// [Kind] hosts an agent as an effector kind: a "task" record (EA-Process =
// session) starts a run; its text chunks and events are published at once on
// the effector's outbox (actor.Context.EmitNow, types "task.chunk" and
// "task.event"), then one "task.done" or "task.error". [Remote] is the caller's
// side: it subscribes to that outbox, sends the task record and feeds the
// records of its session to the sinks; Cancel sends a high-priority "cancel"
// record of the same process, which cancels the logic's context on the node.
//
// # Nodes, routing and retries
//
// [Node] makes an agent a step over a state: SelectInput, the run (Timeout,
// Retry with backoff as a retry.Policy (actor.RetryPolicy), skipping [Permanent]
// failures), ApplyResult, and Route to the next node or [End].
// [RunSequence] is the sequential runtime and [Graph] builds the same on the
// graph engine; both route and retry alike.
package task
