package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go"
)

// Exit statuses; see the package doc.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitUnavailable = 4
	exitConflict    = 5
	exitDead        = 6
	exitFailed      = 8
)

// DefaultNATS is where ea connects by default: the embedded server of an
// ea-node started with no flags (make run).
const DefaultNATS = "nats://127.0.0.1:4222"

// env is the process's environment as ea reads it.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// now is the clock (tests keep the real one).
	now func() time.Time
}

// global are the settings every command takes.
type global struct {
	nats    string
	prefix  string
	timeout time.Duration
	json    bool
	// groups and partitions are the deployment's stream group and
	// partition counts when given (0: read from the deployment, which a
	// least-privilege client may not do).
	groups, partitions int
}

// command is one ea command.
type command struct {
	name  string
	args  string // placeholder text of the positional arguments
	short string
	long  string
	// flags adds the command's own flags.
	flags func(fs *flag.FlagSet)
	// run runs the command with its positional arguments.
	run func(ctx context.Context, a *app, args []string) error
	// sub are the subcommands (ea orch ...); a command has run or sub.
	sub []*command
}

// app is one invocation of ea.
type app struct {
	env
	g    global
	cmd  *command
	fs   *flag.FlagSet
	conn *bus.Conn
	// auth: how to authenticate to NATS (the settings every binary shares).
	auth cli.Auth
	// following: the command runs until interrupted (tail --follow, top),
	// so an interrupt ends it with status 0.
	following bool
	// denials ends a request the server refuses for the user's
	// permissions at once.
	denials *denials
}

// usageError is a bad command line: exit status 2, with the command's usage
// hint.
type usageError struct {
	cmd string // the command path, e.g. "ea send"
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd string, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitErr carries an explicit exit status.
type exitErr struct {
	code int
	err  error
}

func (e *exitErr) Error() string { return e.err.Error() }
func (e *exitErr) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitErr{code: code, err: err} }

// run is ea: it parses args, runs the command and returns the exit status.
// Everything it prints goes to stdout (results) and stderr (errors).
func run(ctx context.Context, args []string, e env) int {
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	if e.now == nil {
		e.now = time.Now
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &app{env: e, denials: newDenials(cancel)}
	err := a.dispatch(ctx, args)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errPermission) {
		// The server refused a request for the user's permissions (and
		// the command ended at once, see denials): say so, not "canceled".
		err = withCode(exitError, a.explainDenied(cause))
	}
	if a.conn != nil {
		_ = a.conn.Close()
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code := exitStatus(err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(e.stderr, "%s: %s\n", ue.cmd, ue.msg)
		fmt.Fprintf(e.stderr, "run '%s --help' for usage\n", ue.cmd)
		return code
	}
	if a.following && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return exitOK // interrupted (Ctrl-C) while following: how following ends
	}
	fmt.Fprintf(e.stderr, "ea: %s\n", bus.RedactURL(err.Error()))
	return code
}

// exitStatus maps an error to the exit status the package doc documents.
func exitStatus(err error) int {
	var ee *exitErr
	var ue *usageError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, actor.ErrNotFound), errors.Is(err, store.ErrNotFound),
		errors.Is(err, store.ErrUnknownKind),
		errors.Is(err, supervisor.ErrUnknownOrchestration), errors.Is(err, supervisor.ErrUnknownName):
		return exitNotFound
	case errors.Is(err, actor.ErrNoHost), errors.Is(err, store.ErrUnavailable),
		errors.Is(err, supervisor.ErrUnavailable), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, errConnect):
		return exitUnavailable
	case errors.Is(err, actor.ErrExists), errors.Is(err, actor.ErrTerminated),
		errors.Is(err, supervisor.ErrNotWaiting), errors.Is(err, supervisor.ErrFinished),
		errors.Is(err, actor.ErrCorruptState):
		return exitConflict
	case errors.As(err, new(*typeRefusedError)):
		return exitUsage
	case errors.Is(err, errDeadLettered):
		return exitDead
	case errors.Is(err, errFailed):
		return exitFailed
	case errors.Is(err, actor.ErrInvalid), errors.Is(err, store.ErrInvalid), errors.Is(err, supervisor.ErrInvalid),
		errors.Is(err, actor.ErrForbidden), errors.Is(err, actor.ErrTooLarge):
		// The server refused what was given: the caller's input.
		return exitUsage
	}
	return exitError
}

// connectRetry bounds how long ea tries again to reach a server that
// refuses the connection.
const connectRetry = time.Second

// names returns the deployment's names: the connection's, or those of
// --prefix before it is made.
func (a *app) names() bus.Names {
	if a.conn != nil {
		return a.conn.Names()
	}
	n, _ := bus.NewNames(firstNonEmpty(a.g.prefix, bus.DefaultPrefix))
	return n
}

// errConnect marks a failure to reach NATS.
var errConnect = errors.New("cannot reach NATS")

// globalFlags adds the settings every command takes to fs, with defaults from
// the environment (EA_NATS, EA_PREFIX, EA_TIMEOUT, EA_JSON).
func (a *app) globalFlags(fs *flag.FlagSet) {
	nats := firstNonEmpty(a.getenv("EA_NATS"), DefaultNATS)
	prefix := firstNonEmpty(a.getenv("EA_PREFIX"), bus.DefaultPrefix)
	fs.StringVar(&a.g.nats, "nats", nats, "NATS server URL(s), comma-separated (env EA_NATS)")
	fs.StringVar(&a.g.prefix, "prefix", prefix, "subject prefix of the deployment (env EA_PREFIX)")
	fs.Func("timeout", "how long to wait for NATS and for each answer, e.g. 5s (env EA_TIMEOUT; default 10s)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return errors.New("want a positive duration such as 5s")
		}
		a.g.timeout = d
		return nil
	})
	for _, st := range authSettings() {
		if e := a.getenv(st.Env()); e != "" {
			st.Check(a, e) // checked again by Auth.Load
		}
		fs.Func(st.Name, st.Usage+" (env "+st.Env()+")", func(v string) error {
			if want := st.Check(a, v); want != "" {
				return errors.New(want)
			}
			return nil
		})
	}
	fs.BoolVar(&a.g.json, "json", a.getenv("EA_JSON") == "1" || a.getenv("EA_JSON") == "true", "print JSON (one value per line) instead of tables (env EA_JSON=1)")
	// The layout: read from the deployment unless given. A user who may not
	// read the mailbox streams (the client role of deploy/nats) must give
	// it on a deployment with stream groups.
	for _, l := range a.layoutSettings() {
		fs.Func(l.name, l.usage, func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New("want a whole number, at least 1")
			}
			*l.to = n
			return nil
		})
	}
}

// layoutSetting is a count of the deployment's layout every command takes:
// its flag, its environment variable and where it goes.
type layoutSetting struct {
	name, env, usage string
	to               *int
}

func (a *app) layoutSettings() []layoutSetting {
	return []layoutSetting{
		{"stream-groups", "EA_STREAM_GROUPS", "stream group count of the deployment (env EA_STREAM_GROUPS; default: read from the deployment)", &a.g.groups},
		{"partitions", "EA_PARTITIONS", "mailbox partition count of the deployment (env EA_PARTITIONS; default: read from the deployment)", &a.g.partitions},
	}
}

// authSettings are the NATS authentication and TLS settings every effectors
// binary shares (--creds, --nkey, --user, --password-file, --token-file,
// --tls-ca, --tls-cert, --tls-key; passwords and tokens never on the
// command line: EA_PASSWORD, EA_TOKEN or a file).
func authSettings() []*cli.Setting[app] {
	return cli.AuthSettings(func(a *app) *cli.Auth { return &a.auth })
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// dispatch finds the command and runs it.
func (a *app) dispatch(ctx context.Context, args []string) error {
	cmds := commands()
	if len(args) == 0 {
		a.topUsage(a.stderr, cmds)
		return usagef("ea", "no command given")
	}
	name := args[0]
	switch name {
	case "-h", "--help", "-help":
		a.topUsage(a.stdout, cmds)
		return nil
	case "--version", "-version":
		name, args = "version", append([]string{"version"}, args[1:]...)
	case "help":
		return a.help(cmds, args[1:])
	}
	if strings.HasPrefix(name, "-") {
		// Global flags before the command (ea --nats URL state x/y), as the
		// nats CLI allows: moved after the command's arguments.
		moved, rest, err := leadingGlobals(args)
		if err != nil {
			return err
		}
		if len(rest) == 0 {
			return usagef("ea", "no command given after %s", strings.Join(moved, " "))
		}
		if i := slices.Index(rest, "--"); i >= 0 {
			args = slices.Concat(rest[:i], moved, rest[i:])
		} else {
			args = slices.Concat(rest, moved)
		}
		name = args[0]
	}
	cmd := find(cmds, name)
	if cmd == nil {
		return usagef("ea", "unknown command %q (commands: %s)", name, names(cmds))
	}
	path := "ea " + cmd.name
	args = args[1:]
	for cmd.sub != nil {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
			if len(args) == 0 {
				a.cmdUsage(a.stderr, path, cmd)
				return usagef(path, "needs a subcommand: %s", names(cmd.sub))
			}
			a.cmdUsage(a.stdout, path, cmd)
			return nil
		}
		sub := find(cmd.sub, args[0])
		if sub == nil {
			return usagef(path, "unknown subcommand %q (subcommands: %s)", args[0], names(cmd.sub))
		}
		cmd, path, args = sub, path+" "+sub.name, args[1:]
	}
	a.cmd = cmd
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.globalFlags(fs)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	a.fs = fs
	if t := a.getenv("EA_TIMEOUT"); t != "" && a.g.timeout == 0 {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return usagef(path, "EA_TIMEOUT %q: want a positive duration such as 5s", t)
		}
		a.g.timeout = d
	}
	for _, l := range a.layoutSettings() {
		if v := a.getenv(l.env); v != "" && *l.to == 0 {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return usagef(path, "%s %q: want a whole number, at least 1", l.env, v)
			}
			*l.to = n
		}
	}
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		a.cmdUsage(a.stdout, path, cmd)
		return err
	}
	if err != nil {
		return usagef(path, "%v", err)
	}
	if a.g.timeout == 0 {
		a.g.timeout = 10 * time.Second
	}
	if err := a.auth.Load(a.getenv); err != nil {
		return usagef(path, "%v", err)
	}
	if _, err := bus.NewNames(a.g.prefix); err != nil || a.g.prefix == "" {
		return usagef(path, "--prefix %q: want one subject token: 1-128 characters of A-Z a-z 0-9 _ -", a.g.prefix)
	}
	if strings.TrimSpace(a.g.nats) == "" {
		return usagef(path, "--nats: want a NATS URL such as %s", DefaultNATS)
	}
	return cmd.run(ctx, a, pos)
}

// explainDenied says why a request the server refused for the user's
// permissions may have been made, and what to do.
func (a *app) explainDenied(cause error) error {
	n := a.names()
	var d *deniedErr
	if errors.As(cause, &d) && a.g.groups == 0 && a.conn != nil && a.conn.Names().Groups() == 1 {
		// The one-stream layout's outbox stream and state bucket, which
		// the client role opens there: ea could not read the layout and
		// took the one-stream names.
		for _, s := range []string{n.OutboxStream(), "KV_" + n.StateBucketOf(0)} {
			if strings.HasSuffix(d.subject, "."+s) {
				return fmt.Errorf("%w (%s belongs to the one-stream layout: if the deployment has stream groups, ea cannot read them as this user, so give them: --stream-groups G --partitions P, or EA_STREAM_GROUPS and EA_PARTITIONS, as ea-node has them)", cause, s)
			}
		}
	}
	return fmt.Errorf("%w (the client role of deploy/nats does not open %s, %s or %s, which tail dead, dead replay, top and orch ls read: use a user that may, such as admin)",
		cause, n.DeadStream(), n.MailboxStream(), n.OrchBucket())
}

// leadingGlobals splits the global flags before the command from the rest.
func leadingGlobals(args []string) (flags, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			return flags, args[i:], nil
		}
		if a == "--" {
			return nil, nil, usagef("ea", "no command given before --")
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "json":
			flags = append(flags, a)
		case "nats", "prefix", "timeout", "stream-groups", "partitions", "creds", "nkey", "user", "password-file", "token-file", "tls-ca", "tls-cert", "tls-key":
			flags = append(flags, a)
			if !hasValue {
				if i+1 >= len(args) {
					return nil, nil, usagef("ea", "flag needs an argument: %s", a)
				}
				i++
				flags = append(flags, args[i])
			}
		default:
			return nil, nil, usagef("ea", "%s before the command: only the connection flags (--nats, --prefix, --timeout, --json, --creds, --user, ...) may come first; put the command's flags after it", a)
		}
	}
	return flags, nil, nil
}

// parseInterspersed parses flags anywhere among the arguments (ea send
// counter/c1 '{}' --type inc), the way the nats CLI does; "--" ends the
// flags. It returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs stopped at a positional argument, or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

func names(cmds []*command) string {
	var ns []string
	for _, c := range cmds {
		ns = append(ns, c.name)
	}
	return strings.Join(ns, ", ")
}

// connect returns the connection, making it on first use.
func (a *app) connect(ctx context.Context) (*bus.Conn, error) {
	if a.conn != nil {
		return a.conn, nil
	}
	// A server that refuses the connection is tried again for up to
	// connectRetry, not the whole --timeout: ea fails fast where nothing
	// listens, as the nats CLI does.
	wait := min(a.g.timeout, connectRetry)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.Config{
		URL: a.g.nats, Prefix: a.g.prefix, Name: "ea-cli", ConnectTimeout: wait,
		Groups: a.g.groups, Partitions: a.g.partitions,
		Options: append(a.auth.Options(), nats.ErrorHandler(a.denials.handler)),
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		if errors.Is(err, bus.ErrAuth) {
			return nil, withCode(exitUnavailable, err)
		}
		if errors.Is(err, bus.ErrInvalidConfig) {
			return nil, usagef("ea "+a.cmd.name, "%v", err)
		}
		cause := err
		for u := errors.Unwrap(cause); u != nil; u = errors.Unwrap(cause) {
			cause = u
		}
		return nil, fmt.Errorf("%w at %s: %w (is ea-node running there? start one with make run, or point --nats / EA_NATS at your NATS server)", errConnect, bus.RedactURL(a.g.nats), cause)
	}
	if a.g.groups > 0 || a.g.partitions > 0 {
		// Told the layout: check it where the user may read it (a
		// least-privilege client may not, and is not stopped by that).
		sctx, end := a.denials.scope(ctx)
		err := conn.CheckLayout(sctx)
		if denied := end(); denied == nil && errors.Is(err, bus.ErrInvalidConfig) {
			_ = conn.Close()
			return nil, usagef("ea "+a.cmd.name, "--stream-groups, --partitions: %v", err)
		}
	}
	a.conn = conn
	return conn, nil
}

// actorClient returns an actor.Client on the connection.
func (a *app) actorClient(ctx context.Context) (*actor.Client, error) {
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.g.timeout)
	defer cancel()
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		return nil, withCode(exitUnavailable, fmt.Errorf("%w (was the deployment provisioned? ea-node does it at start)", err))
	}
	return c, nil
}

// storeReader returns the record store's client over NATS (served by ea-node,
// --record-store).
func (a *app) storeReader(ctx context.Context) (store.Reader, error) {
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	return store.NewRemote(conn)
}

// supervisorClient returns the orchestration API's client.
func (a *app) supervisorClient(ctx context.Context) (*supervisor.Client, error) {
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	return supervisor.NewClient(conn)
}

// call bounds one request by the timeout.
func (a *app) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.g.timeout)
}

// onEffector is the run of a command whose first argument is <kind>/<id>
// and whose work is one call through the actor client: it checks that
// there are min to max arguments, parses the reference, connects, and
// runs do with a context bounded by --timeout.
func onEffector(min, max int, do func(ctx context.Context, a *app, c *actor.Client, ref records.Ref, args []string) error) func(context.Context, *app, []string) error {
	return func(ctx context.Context, a *app, args []string) error {
		if err := a.nargs(args, min, max); err != nil {
			return err
		}
		ref, err := a.ref(args[0])
		if err != nil {
			return err
		}
		c, err := a.actorClient(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := a.call(ctx)
		defer cancel()
		return do(cctx, a, c, ref, args)
	}
}

// ref parses a <kind>/<id> argument.
func (a *app) ref(arg string) (records.Ref, error) {
	r, err := records.ParseRef(arg)
	if err != nil {
		return records.Ref{}, usagef(a.fs.Name(), "%q: want <kind>/<id>, each 1-128 characters of A-Z a-z 0-9 _ - (%v)", arg, err)
	}
	return r, nil
}

// nargs checks the number of positional arguments.
func (a *app) nargs(args []string, min, max int) error {
	if len(args) < min {
		return usagef(a.fs.Name(), "needs %s", a.cmd.args)
	}
	if max >= 0 && len(args) > max {
		return usagef(a.fs.Name(), "unexpected argument %q (takes %s)", args[max], firstNonEmpty(a.cmd.args, "no arguments"))
	}
	return nil
}

// help answers ea help [command [subcommand]].
func (a *app) help(cmds []*command, args []string) error {
	if len(args) == 0 {
		a.topUsage(a.stdout, cmds)
		return nil
	}
	path := "ea"
	var cmd *command
	list := cmds
	for _, n := range args {
		c := find(list, n)
		if c == nil {
			return usagef("ea help", "no command %q in %s (commands: %s)", n, path, names(list))
		}
		cmd, path, list = c, path+" "+c.name, c.sub
	}
	a.cmdUsage(a.stdout, path, cmd)
	return nil
}

func (a *app) topUsage(w io.Writer, cmds []*command) {
	fmt.Fprint(w, `ea drives effectors at a terminal: send records, read state, follow the
record log, run orchestrations, watch the load.

Usage: ea [--nats URLS] [--prefix NAME] <command> [arguments] [flags]

Commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.short)
	}
	fmt.Fprint(w, `  help        help about a command (ea help tail)

Flags every command takes:
  --nats URLS      NATS server URL(s) (env EA_NATS; default `+DefaultNATS+`)
  --prefix NAME    subject prefix of the deployment (env EA_PREFIX; default ea)
  --timeout D      how long to wait for NATS and each answer (env EA_TIMEOUT; default 10s)
  --json           JSON output, one value per line (env EA_JSON=1)
  --stream-groups N, --partitions N
                   the deployment's layout (env EA_STREAM_GROUPS, EA_PARTITIONS;
                   default: read from the deployment, which a least-privilege
                   client user may not: give them with stream groups)
  --creds FILE, --nkey FILE, --user NAME (password from EA_PASSWORD or
  --password-file FILE), --token-file FILE (or EA_TOKEN), --tls-ca FILE,
  --tls-cert FILE, --tls-key FILE: NATS authentication and TLS, as for
  ea-node and ea-supervisor (env EA_CREDS, EA_NKEY, EA_USER, ...)

Exit status: 0 ok, 1 error (or permission denied), 2 usage (bad arguments, or input the server
refused), 3 not found, 4 unavailable (NATS, or no node / supervisor / record
store answering), 5 conflict (already exists, terminated, not waiting, finished),
6 dead-lettered (send --wait: the runtime sent the record to dead letters),
7 replay differs (the state rebuilt from the record log is not the stored one),
8 failed (send --wait: applied, but answered with an error record such as
task.error; orch start --wait: the orchestration FAILED).

Try (after make run):
  ea create counter/c1
  ea send counter/c1 '{"by":2}' --type inc
  ea state counter/c1
  ea tail outbox counter/c1 --follow
`)
}

func (a *app) cmdUsage(w io.Writer, path string, cmd *command) {
	fmt.Fprintf(w, "Usage: %s", path)
	if cmd.sub != nil {
		fmt.Fprintf(w, " <subcommand>\n\n%s\n", strings.TrimSpace(firstNonEmpty(cmd.long, cmd.short)))
		fmt.Fprint(w, "\nSubcommands:\n")
		for _, s := range cmd.sub {
			fmt.Fprintf(w, "  %-7s %-24s %s\n", s.name, s.args, s.short)
		}
		return
	}
	if cmd.args != "" {
		fmt.Fprintf(w, " %s", cmd.args)
	}
	fmt.Fprintf(w, " [flags]\n\n%s\n", strings.TrimSpace(firstNonEmpty(cmd.long, cmd.short)))
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f) })
	if len(own) > 0 {
		sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
		fmt.Fprint(w, "\nFlags:\n")
		for _, f := range own {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			fmt.Fprintf(w, "  %s%-12s %s", dash, f.Name, f.Usage)
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprint(w, "\nand --nats, --prefix, --timeout, --json, --stream-groups, --partitions and the NATS authentication flags (ea help)\n")
}
