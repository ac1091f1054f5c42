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
// Go type whose JSON schema is derived from the type and validated) and
// [RunTools] (the tool-call loop with a step limit) work on it.
//
// # Errors
//
// Every failure is an [*Error] with a [Code] callers switch on (failed,
// panic, timeout, cancelled, permission, invalid, not_found, unavailable,
// provider, schema, steps) and the cause kept for errors.Is and errors.As.
// The sentinels ErrTimeout, ErrPermission, … match any *Error of their code.
//
// # Pipelines over NATS
//
// [ServePipelines] serves a registry as a NATS micro service, so any client
// discovers what a node offers ([ListPipelines], or `nats micro info
// ea_pipelines`) and calls it ([CallPipeline]).
package core
