// Package remote runs a kind's logic in another process, in any language,
// over NATS request-reply: one idea, logic served from outside the node.
//
// The node keeps everything a kind's guarantees rest on: the order of the
// records, the state document, effectively-once application, retries and
// dead letters. For each record it sends the worker one request, on
// <prefix>.logic.<kind> (bus.Names.Logic), holding the record and the
// current state; the worker answers the new state and the records to send.
// The node then does what it does after any logic: publish the records,
// write the state with compare-and-set, acknowledge. The contract, in JSON
// and msgpack, is docs/polyglot.md; reference workers in JavaScript and
// Python are in clients/workers.
//
// # Host a remote kind
//
//	k, err := remote.New(conn, "counter", remote.Options{})
//	if err != nil { ... }
//	err = node.Host(k)
//
// ea-node does the same for each kind of --remote-kinds (EA_REMOTE_KINDS).
//
// # Failures
//
// Workers share the load as a NATS queue group (bus.Names.LogicQueue). They
// are stateless: a worker that dies holding a record never answers, the
// request times out ([Options.Timeout]) with [ErrTimeout], and the kind's
// retry policy sends the record again, to any worker. Nothing was committed
// for the lost attempt, so the record is applied once. A late answer to a
// timed-out request is dropped (each request has its own reply inbox).
// When no worker is left, the timeout is not waited for: from half a second
// into a request the node probes the subject ([HeaderProbe]) every half
// second, and NATS answering "no responders" ends the request with
// [ErrNoWorker].
//
// # Stalls are visible
//
// A run of requests that find no worker or go unanswered is an episode:
// one WARN naming the kind and the subject when it starts
// ([Options.Logger]), one INFO when a worker answers again. The kind's
// actor.Kind.Describe answers the kind endpoint (actor.Client.Kind, ea
// kinds, ea state, ea send --wait): the workers that announce themselves
// (the micro ping of bus.Names.LogicService), whether any answers, the
// episode, and the effectors waiting. Workers may announce the record types
// they handle; [Options.Types] declares them on the node instead.
//
// What each outcome does to the record:
//
//   - a reply with "state": the records it lists are held through the
//     actor.Context (Send, Emit, Reply: validated and routed exactly as for a
//     Go kind), then committed with the state;
//   - no worker ([ErrNoWorker]), a timeout ([ErrTimeout]), a worker's
//     retryable error ([*WorkerError]): retried with the kind's policy
//     ([DefaultRetry] unless [Options.Retry]), then dead letters;
//   - a worker's permanent error (retry.Permanent), a malformed reply
//     ([ErrMalformed]: does not decode, no state, too large, too many
//     records, a record the runtime refuses), a payload or state that
//     cannot be carried in the encoding ([ErrConvert]): dead letters at
//     once, the reason in EA-Error.
//
// # Metrics
//
// With [Options.Registerer], ea_remote_requests_total{kind, outcome} counts
// requests by outcome, ea_remote_request_seconds{kind} times the answered
// ones, ea_remote_stalled{kind} is 1 during an episode and
// ea_remote_waiting_effectors{kind} counts the effectors waiting for a
// worker; the node's own metrics count remote kinds like any kind.
package remote
