// Package core holds the agent services that effector logic and graph nodes
// reach ("AgentCore"), the run bridge, and the one error type they all return.
//
// # Services and scopes
//
// [Services] is what a node offers: an [LLM] (core/llm speaks any
// OpenAI-compatible API), a registry of [Pipelines], a registry of [Tools]
// and an optional [Vector] store (core/vector). A kind sees them through a
// [Scope] limited by its [Permissions]: a service, pipeline or tool it did not
// declare fails with a CodePermission error before anything runs.
//
// # Reaching the services
//
// Logic finds its scope in its context with [From]:
//
//   - effector logic: wrap the kind with [Wrap]; the logic calls
//     core.From(ctx) on its *actor.Context;
//   - graph nodes and any other code: run it with [Run] (the run bridge), or
//     put a scope in a context with [With].
//
// A Scope is itself an [LLM], so [GenerateObject] (an answer decoded into a
// Go type whose JSON schema is derived from the type and validated),
// [StreamObject] (the same, streamed as partial objects) and [RunTools] (the
// tool-call loop with a step limit) work on it.
//
// # Token usage
//
// Every [Response] carries its [Usage]; a stream ends with a [Delta] whose
// Final holds the whole response and its usage. Requests made through a
// Scope are counted in ea_llm_tokens_total{kind,direction} ([Metrics], set
// on Services.Metrics) and summed per record in the [Tally] that [Wrap]
// gives each attempt ([TallyOf]).
//
// # Tool approval
//
// [RunTools] asks a [CanUseTool] hook before each call: allow, deny with a
// reason the model sees ("denied: <reason>" as the call's result), or ask.
// An ask waits for an [Asker] — [Approvals] answers from Go; task.Kind
// answers from task.approve records over NATS — or, with none, pauses the
// loop: a CodeApproval error whose cause is a *[Pause] to keep (in an
// orchestration's state, say) and resume with [ResumeFrom] and the answer.
// [OnToolEvent] reports each call, approval, decision and result;
// [StreamTo] streams the model's text.
//
// # Errors
//
// Every failure is an [*Error] with a [Code] callers switch on (failed,
// panic, timeout, cancelled, permission, invalid, not_found, unavailable,
// provider, schema, steps, approval) and the cause kept for errors.Is and
// errors.As. [Error.Permanent] says which codes retrying cannot fix, and
// every package honours it (retry.IsPermanent, which actor.IsPermanent and
// graph.IsPermanent are): a node dead-letters such a record at once, a graph
// and task.Node do not retry it. [Permanent] tests a whole chain and sees
// the marks of retry.Permanent (actor.Permanent, graph.Permanent) too.
// The sentinels ErrTimeout, ErrPermission, … match any *Error of their code.
//
// # Services of your own as tools
//
// A [ToolFile] ([LoadToolFile], [ParseToolFile]) describes services beside
// the built-in ones — NATS request-reply subjects (a NATS micro service's
// endpoints) and HTTP endpoints — with a name, a description and a JSON
// schema each; [ToolFile.Build] makes them [Tool]s for a [Tools] registry,
// so the model of a tool-call loop calls them. A service's failure is an
// error the model sees, never the end of the loop.
//
// # Streamed text
//
// [Coalesce] says how streamed text is gathered into fewer, larger records
// (by default a chunk waits at most 50ms for more, and 2 KiB goes out at
// once); a [Coalescer] applies the rule in a loop of one's own, and
// [CoalesceStream] around a [Delta] stream. task.Kind and conversation
// threads publish their text this way.
//
// # Pipelines over NATS
//
// [ServePipelines] serves a registry as a NATS micro service, so any client
// discovers what a node offers ([ListPipelines], or `nats micro info
// ea_pipelines`) and calls it ([CallPipeline]).
package core
