// Package retry is the one vocabulary of failure the runtime's packages
// share: a [Policy] saying how often and how fast failing work is tried
// again, and [Permanent], the mark of an error that retrying cannot fix.
//
// Every package that retries honours both: an effector's logic (actor), a
// graph node (graph), an agent node (core/task) and an LLM request
// (core/llm). actor.RetryPolicy, graph.RetryPolicy and llm.Retry are
// aliases of [Policy]; actor.Permanent and graph.Permanent are [Permanent],
// so an error marked by one package is permanent to all of them.
//
// # Permanent errors
//
// An error is permanent when its chain holds an error marked with
// [Permanent], or an error with a method Permanent() bool that returns
// true: core's *Error does, for the codes retrying cannot fix (invalid
// input, permission, missing services…). Test with [IsPermanent], or with
// the predicate of the package at hand (actor.IsPermanent,
// graph.IsPermanent, core.Permanent): they all say the same.
package retry
