// Package threads is the example of an LLM-driven supervisor with worker
// threads: an orchestration ("research") whose next step is chosen by a
// model from what its workers answered, and whose workers are conversation
// threads (package core/conversation) it creates, sends to, branches and
// kills.
//
//	START → open (create thread <id>-main) → ask (send the goal; wait durably for the reply)
//	ask → decide: the model reads the replies and picks one of
//	        followup (send another message to the main thread) → ask
//	        branch   (copy the main thread after its first turn, ask the copy something else) → ask
//	        finish   (its answer) → finish
//	finish: kill every thread → END
//
// The decision is structured output (core.GenerateObject of [Choice]). A
// choice that is not one of the three steps, lacks its message, does not fit
// the schema, or cannot be had at all (the provider is down) is replaced by
// the fallback, finish, after MaxRounds decisions too. Every decision — the
// model's choice, the step taken, whether it was a fallback and why — is in
// the orchestration's results (ea.orch.status) and in the supervisor's log.
// An orchestration that ends with no answer at all — every question a
// thread was asked answered with an error (the model is down), and no final
// message from the model — kills its threads and ends FAILED, the last
// error in its status (ea orch start --wait exits 8), not COMPLETED.
package threads
