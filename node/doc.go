// Package node builds node binaries: a process that hosts your effector
// kinds on NATS JetStream with the flags, EA_* environment variables,
// health and metrics endpoints and graceful shutdown of ea-node.
//
// # In one line
//
// [Main] is a whole main:
//
//	func main() { node.Main(greeter.Kind(), billing.Kind()) }
//
// The binary then takes every ea-node flag (--nats, --listen, --store,
// --prefix, --partitions, --metrics, placement, --reply-subjects, ...;
// run it with -h), each also read from EA_<FLAG>. With no --nats it embeds
// a NATS server with JetStream storing in --store. /healthz answers 200
// while it runs and /readyz 200 once it is connected, has provisioned the
// streams and buckets and serves its kinds. SIGINT or SIGTERM stops it
// gracefully (records in hand finish for up to --shutdown-grace); a second
// signal kills it. Exit status: 0 after a clean shutdown, 1 on failure, 2
// for a bad flag or environment value.
//
// --remote-kinds (EA_REMOTE_KINDS) hosts, besides the binary's own kinds,
// kinds whose logic worker processes in any language serve over NATS
// request-reply (package remote, docs/polyglot.md); a binary may then have
// no Go kind at all.
//
// # Agent kinds
//
// [Command.Agents] returns kinds that ask a model (core.Wrap, task.Kind,
// conversation.Kind). It is called once connected with [Agents]: the
// services of the --llm-* settings (--llm-base-url, --llm-model,
// --llm-embed-model, --llm-api-key-file; EA_LLM_BASE_URL, EA_LLM_MODEL,
// EA_LLM_EMBED_MODEL and the key in EA_LLM_API_KEY, never a flag), and the
// services of the user's own that --tools describes (core.ToolFile: NATS
// subjects and HTTP endpoints) as tools. Without --llm-base-url it is not
// called: the node hosts its other kinds and logs how to turn these on.
// --llm-base-url scripted: is the built-in scripted model
// (core/llm/scripted: canned answers that start with "[scripted model]",
// nothing on the network, no key), announced by a WARN at start. A
// malformed setting stops the binary at start with exit status 2.
//
// # More control
//
// A [Command] names the binary, describes it for -h, chooses what it prints
// once ready ([Command.Banner], [Info], [DefaultBanner]), adjusts the
// actor.Options the flags set ([Command.Configure]: services, a registry)
// and runs code once the kinds are hosted ([Command.Setup]).
// [Command.Run] runs it in-process with explicit arguments, environment and
// output streams, as tests do; [Command.Main] runs it as the process.
//
// ea-node (cmd/node) is this package's Command with the example kinds;
// examples/greeter shows a user's own kind in its own binary.
package node
