// Package supervisor runs orchestrations: multi-step processes whose steps
// are the nodes of a state graph (package graph) and which route work by
// publishing task records to worker effectors, durably, with nothing held in
// memory while they wait.
//
// # Orchestrations
//
// An orchestration definition is a graph over a state type S (Spec, Define).
// Its nodes run inside the supervisor. A node that calls Call is a remote
// step: Call publishes a task record to a worker's mailbox
// (<prefix>.mbox.<kind>.<id>) with EA-Process = the orchestration id and
// EA-Reply = the orchestration's supervisor mailbox
// (<prefix>.mbox.supervisor.<id>), and pauses the graph (a graph interrupt).
// When the worker's "result" or "error" record arrives in that mailbox, the
// node runs again from its start and Call returns the answer. A worker's
// error (an "error" record, or a result with an "error" field) is a value
// for the node to decide on: retry (route back to itself, counting attempts
// in the state), take an alternative path (route elsewhere), or fail (return
// an error: the orchestration is FAILED). A node that calls AwaitInput waits
// for input given through the API: the orchestration is WAITING until then.
//
// A task its worker cannot process at all (the record goes to dead letters:
// a payload that does not decode, logic failing for good, a panic) also
// comes back as an error: supervisors follow the dead letters, and one of a
// task record (its EA-Reply is a supervisor mailbox) becomes an error
// answer from that worker, "the worker could not process the task (dead
// letter, reason <reason>): <error>". A Call with the Timeout option gets
// the error answer "no answer within <d>" when its worker is too slow; the
// timer is a record in the stream (<prefix>.mbox.supervisor-timer.<id>,
// redelivered when due), not a goroutine, so it survives restarts too.
//
//	b := graph.New[S]()
//	b.AddNode("a", func(ctx context.Context, s S) (graph.Update[S], error) {
//		res, err := supervisor.Call(ctx, records.Ref{Kind: "task-a", ID: "w1"}, "task", kinds.TaskInput{Text: s.Text})
//		if err != nil {
//			return graph.Update[S]{}, err // pausing: return it as is
//		}
//		if res.Err != nil {
//			return graph.Update[S]{}.Goto("fallback"), nil
//		}
//		...
//	})
//	def, err := supervisor.Define(supervisor.Spec[S]{Name: "mine", Graph: b})
//
// The example orchestration "demo" that ea-supervisor runs is in
// examples/demo.
//
// # Your own supervisor binary
//
// Package supervisord runs a supervisor binary for your definitions with
// the flags, EA_* variables, health and metrics endpoints, gateway and
// graceful shutdown of ea-supervisor: supervisord.Main(def) is a whole main;
// supervisord.Command gives more control (its name, -h text, banner,
// options). This package is the library only: it imports no binary glue, so
// that what the binary serves (package web) can use its [Client].
//
// # Agent services and threads
//
// A Spec may give its nodes the agent services (Spec.Services, limited by
// Spec.Permissions): a node reaches them with core.From(ctx), for example
// to let a model choose the next step from the workers' results (see
// examples/threads), or to run a tool loop whose approvals come from the
// orchestration's input (core.Pause kept in the state, AwaitInput, then
// core.ResumeFrom). [ActorClient] gives a node the supervisor's
// actor.Client to create, branch and terminate worker threads (package
// core/conversation); [Logger] its logger, with the orchestration's id.
//
// # Durability
//
// An orchestration is its record in the KV bucket <prefix>_orch, key <id>:
// name, status, step, what it waits for, the active tasks, answers received,
// the original input, the results (JSON), the error and the graph's
// checkpoint. Every change (start, a result, input, cancel) reads the
// record, runs the graph from the checkpoint to its next pause, publishes
// the task records it sends, and writes the record with compare-and-set on
// the revision it read. That write is the commit point:
//
//   - a supervisor that dies before it leaves the orchestration as it was;
//     the result record that caused the change is redelivered and applied
//     again, and the tasks it publishes again carry the same ids, so the
//     stream's duplicate window drops them;
//   - results that arrive while no supervisor runs wait in the stream and are
//     applied when one comes back;
//   - a result applied once is not awaited any more: a redelivery is
//     acknowledged without effect;
//   - two supervisors never both advance one orchestration: the loser of the
//     compare-and-set reads again and re-applies its event, which then usually
//     no longer applies (ErrNotWaiting, ErrFinished, or a result no longer
//     awaited). A task the loser published from its discarded decision has
//     another id than the winner's (ids hash what is sent); its result answers
//     no active task and is dropped.
//
// # The API
//
// A Supervisor serves <prefix>.orch.start, status, input and cancel as a NATS
// micro service (queue group: any running supervisor answers), with JSON
// bodies (StartRequest, IDRequest, InputRequest; replies StartReply,
// Orchestration, OKReply) and errors in the Nats-Service-Error and
// Nats-Service-Error-Code headers: 400 bad request, 404 unknown id or name,
// 409 not waiting for input, 410 already finished, 503 unavailable. Client
// calls them from Go and maps the codes to ErrInvalid,
// ErrUnknownOrchestration, ErrUnknownName, ErrNotWaiting, ErrFinished and
// ErrUnavailable.
//
// # Cancel
//
// Cancel marks the orchestration CANCELLED and sends a "cancel" record with
// EA-Priority high and EA-Process = the orchestration id to the worker of
// every outstanding task. The example workers (package kinds) remember the
// process as cancelled and skip its tasks that are still waiting; a task
// already finished is not undone, and its result, if any, is dropped.
//
// # Metrics
//
// ea_orchestrations_started_total{name}, ea_orchestrations_finished_total
// {name,status}, ea_orchestration_steps_total{name,event},
// ea_orchestration_tasks_sent_total{name}, ea_orchestration_conflicts_total
// and ea_orchestration_records_dropped_total{reason}, registered on
// Options.Registerer.
package supervisor
