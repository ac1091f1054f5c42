// Package cli holds the scaffolding the effectors binaries (ea-node,
// ea-supervisor) share, so that both read their settings, log, report
// readiness and exit the same way. Each binary keeps what is its own: its
// settings, what it serves and the hint it prints once ready.
//
// # Settings
//
// A [Setting] is one flag with its environment variable EA_<FLAG> (upper
// case, dashes as underscores) and its default. [Parse] reads a list of them
// from the command line and, for those no flag gives, from the environment;
// a flag wins over its variable and an empty variable counts as unset. Each
// value is kept as text and checked after parsing by the setting's Check, so
// a bad value gets one message naming the flag, the value and, when it came
// from the environment, the variable. Bad input is a [*UsageError]; -h and
// --help return [flag.ErrHelp]. [Usage] builds the -h text around
// [WriteFlags]. [LogLevelSetting], [LogFormatSetting] and [MetricsSetting]
// are the settings every binary has; [LogLevel], [LogFormat], [Prefix],
// [Metrics], [PositiveDuration] and [IsHostPort] check common kinds of value.
//
// # Connecting securely
//
// [AuthSettings] are the NATS credentials and TLS settings every binary
// shares: --creds, --nkey, --user (its password from EA_PASSWORD or
// --password-file), a token from EA_TOKEN or --token-file, --tls-ca,
// --tls-cert and --tls-key. No secret is ever taken from the command line.
// After [Parse], [Auth.Load] reads and checks them and [Auth.Options] gives
// the nats.Options for bus.Config.Options.
//
// # Running
//
// [Main] wires SIGINT and SIGTERM to a run function (a second signal kills
// at once) and maps its error to the exit status with [ExitStatus]: 0 for
// nil, 2 for a [*UsageError], 1 otherwise. [Run] parses the configuration,
// answers -h, and calls the binary's serve function with a logger built by
// [NewLogger]. [StartProcess] sets up the Prometheus registry
// ([NewRegistry]), the [Readiness] /readyz answers and the server of
// /metrics, /healthz and /readyz ([StartMetrics]); [RunAnnounced] prints a
// hint once the process is ready; [CloseConn] closes the NATS connection.
//
// # Version
//
// [Version] is the binaries' version: set at build time with
// -ldflags "-X github.com/effectors/effectors/internal/cli.version=v1.4.0",
// else read from the build information. [StartProcess] logs it at start and
// exports it as the metric ea_build_info ([BuildInfo]); ea-node's and
// ea-supervisor's ready banners and ea version print it.
package cli
