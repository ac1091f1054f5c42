// Command ea drives effectors at a terminal, in the style of the nats CLI:
// send records, read and list state, follow the record log, run
// orchestrations and watch the load.
//
//	ea send counter/c1 '{"by":2}' --type inc
//	ea state counter/c1
//	ea tail outbox counter/c1 --follow
//	ea orch start demo '{"text":"hello world"}' --wait
//	ea top
//
// Commands: send, state, create, terminate, replay, ls, kinds, tail, dead (replay),
// orch (start, status, input, cancel, ls), top, roles, completion, version, help.
// Flags may follow the arguments; every command takes --nats (EA_NATS),
// --prefix (EA_PREFIX), --timeout (EA_TIMEOUT), --json (EA_JSON=1), and
// --stream-groups (EA_STREAM_GROUPS) and --partitions (EA_PARTITIONS), the
// deployment's layout, which ea reads from the deployment unless given: a
// user that may not read the mailbox streams (the least-privilege client
// role of deploy/nats) gives them on a deployment with stream groups. Given,
// they are checked against the deployment's where the user may read it.
// Tables by default, one JSON value per line with --json.
//
// # Exit status
//
//	0  ok
//	1  error (anything not below), permission denied by NATS
//	2  usage: bad arguments or flags, or input the runtime refused (a bad
//	   id, JSON, header or reply subject)
//	3  not found: effector, kind, orchestration, definition, or the timer
//	   timer cancel names
//	4  unavailable: NATS unreachable, no node hosting the kind, no
//	   supervisor or record store answering, a timeout
//	5  conflict: already exists, terminated, not waiting for input,
//	   already finished
//	6  dead-lettered: send --wait (or dead replay --wait) stored the record,
//	   and the runtime sent it to dead letters; the reason is printed
//	7  replay: the state rebuilt from the record log differs from the
//	   stored state; the first difference is printed
//	8  failed: the work was done and failed. send --wait (or dead replay
//	   --wait): the effector applied the record and answered it with an
//	   error record (type "error" or ending in ".error", such as the
//	   task.error of a task whose model is down), whose message is printed;
//	   orch start --wait: the orchestration ended FAILED (its error is
//	   printed after its status)
//
// Failures are fast: a request the NATS user may not make ends at once
// with "permission denied" (the server's asynchronous permission violation
// cancels it), and a server refusing the connection is tried again for one
// second, not --timeout.
//
// # What it reads
//
// Effector commands go through actor.Client (control endpoints, the state
// bucket, the mailbox); ls, kinds and tail of mailboxes, outboxes, processes
// and types go through the record store's NATS service (store.Remote, served
// by ea-node); tail dead, dead replay and send --wait read the dead-letter
// stream (send --wait from its leader, never from the lagging record
// store); top counts with short-lived consumers and the partition
// consumers' info, and orch ls reads the orchestration bucket; orch start,
// status, input and cancel use the orchestration API (supervisor.Client).
package main
