// Package plan is the plan → review → do example: three agents, each an
// effector whose logic asks an LLM through the agent services (core.Wrap).
//
//   - the planner turns a goal (and any reviewer feedback) into a plan,
//     answered inside <plan>…</plan>;
//   - the reviewer approves it (<verdict>approve</verdict>) and passes it to
//     the executor, or sends it back to the planner with
//     <verdict>revise</verdict><feedback>…</feedback>, at most MaxRounds
//     times;
//   - the executor carries it out and reports a summary and an exit
//     confidence (<summary>…</summary> <exit confidence="0.8"/>) as a "done"
//     record on its outbox, or "failed" when the reviewer gave up.
//
// The tags are read by pure functions ([ParsePlan], [ParseVerdict],
// [ParseExit], [ParseOutcome]). Transient provider errors (429, 5xx) are
// retried twice over: by the provider with exponential backoff
// (llm.Config.Retry), then, if it gives up, by the node, which retries the
// record with exponential backoff (actor.Kind.Retry). An answer that lacks its
// tags is retried the same way, since another sample may have them.
//
// [Run] drives one job from any process: it sends the goal to the planner
// and waits for the executor's outcome of that job (EA-Process = job id).
// cmd/plan runs it all in one process against a real endpoint.
package plan
