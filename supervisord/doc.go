// Package supervisord builds supervisor binaries: a process that serves
// your orchestrations (package supervisor) on NATS JetStream with the flags,
// EA_* environment variables, health and metrics endpoints, WebSocket
// gateway and live record view (package web) and graceful shutdown of
// ea-supervisor. It is to package supervisor what package node is to
// package actor: the binary glue, kept out of the library so that the
// library's users (package web among them) do not import what serves them.
//
// # In one line
//
// [Main] is a whole main:
//
//	func main() {
//		def, err := supervisor.Define(supervisor.Spec[MyState]{...})
//		if err != nil {
//			log.Fatal(err)
//		}
//		supervisord.Main(def)
//	}
//
// The binary then takes every ea-supervisor flag (--nats, --prefix,
// --metrics, --gateway, --gateway-users, --gateway-token-file, ...; run it
// with -h), each also read from EA_<FLAG>. /healthz answers 200 while it
// runs and /readyz 200 once it is connected, has provisioned the streams and
// buckets and serves the orchestration API. A NATS connection closed for good stops it
// with a non-zero exit, so that it is restarted. SIGINT or SIGTERM stops it
// gracefully; a second signal kills it. Exit status: 0 after a clean
// shutdown, 1 on failure, 2 for a bad flag or environment value.
//
// # Model-driven orchestrations
//
// [Command.Agents] returns orchestrations whose nodes ask a model, built
// with the services (an LLM, token metrics) of the --llm-* settings, the
// same as a node's (EA_LLM_BASE_URL, EA_LLM_MODEL, EA_LLM_API_KEY, ...). It
// is called only when --llm-base-url is set; scripted: is the built-in
// scripted model (core/llm/scripted), announced by a WARN at start.
//
// # More control
//
// A [Command] names the binary, describes it for -h, chooses what it prints
// once ready ([Command.Banner], [Info], [DefaultBanner]) and adjusts the
// supervisor.Options the flags set ([Command.Configure]). [Command.Run]
// runs it in-process with explicit arguments, environment and output
// streams, as tests do; [Command.Main] runs it as the process.
//
// ea-supervisor (cmd/supervisor) is this package's Command with the demo
// orchestration (examples/demo) and, with a model, "research"
// (examples/threads).
package supervisord
