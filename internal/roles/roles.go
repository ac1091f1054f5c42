// Package roles writes the least-privilege NATS roles of an effectors
// deployment for its layout (prefix, stream groups, partitions): a
// nats-server configuration ([Roles.WriteServerConfig]) and the same users
// for NATS operators and accounts as an nsc script ([Roles.WriteNSC]).
//
// The permissions name the deployment's streams, buckets and subjects, and
// NATS has no partial-token wildcards, so with stream groups
// (docs/layout.md) every group's outbox stream and state bucket is named one
// by one, mailbox subjects carry the partition token the account mapping
// adds, and the configuration carries that mapping. deploy/nats/roles.conf
// and deploy/nats/nsc.sh are this package's output for the default layout
// (prefix "ea", one stream group); "ea roles" prints it for any other.
//
// # Users
//
// client (apps and people), node (ea-node), supervisor (ea-supervisor) and
// admin (everything in the account), in one account, EA. What each may do,
// and why: the comments of the output and the README's Security section.
package roles

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// ErrInvalidLayout is wrapped by every error [Layout.Validate] returns.
var ErrInvalidLayout = errors.New("roles: invalid layout")

// Layout is what the roles depend on: the deployment's subject prefix,
// stream group count and partition count (the settings ea-node calls
// --prefix, --stream-groups and --partitions).
type Layout struct {
	// Prefix is the subject prefix. Default "ea" ([bus.DefaultPrefix]).
	Prefix string
	// Groups is the stream group count, 1 to [bus.MaxGroups] and at most
	// Partitions. Default 1 (one mailbox stream, one outbox stream, one
	// state bucket).
	Groups int
	// Partitions is the mailbox partition count, 1 to [bus.MaxPartitions]:
	// with Groups above 1 the account mapping the configuration carries
	// hashes mailboxes to this many partitions (with one group the mailbox
	// stream's own transform does, and the roles do not depend on it).
	// Default 64 ([bus.DefaultPartitions]).
	Partitions int
}

func (l Layout) withDefaults() Layout {
	if l.Prefix == "" {
		l.Prefix = bus.DefaultPrefix
	}
	if l.Groups == 0 {
		l.Groups = 1
	}
	if l.Partitions == 0 {
		l.Partitions = bus.DefaultPartitions
	}
	return l
}

// Validate reports what is wrong with l (after its defaults), wrapping
// [ErrInvalidLayout].
func (l Layout) Validate() error {
	l = l.withDefaults()
	switch {
	case records.ValidateKind(l.Prefix) != nil:
		return fmt.Errorf("%w: prefix %q: must be one subject token of 1-128 characters A-Z a-z 0-9 _ -", ErrInvalidLayout, l.Prefix)
	case l.Groups < 1 || l.Groups > bus.MaxGroups:
		return fmt.Errorf("%w: stream groups %d: must be 1-%d", ErrInvalidLayout, l.Groups, bus.MaxGroups)
	case l.Partitions < 1 || l.Partitions > bus.MaxPartitions:
		return fmt.Errorf("%w: partitions %d: must be 1-%d", ErrInvalidLayout, l.Partitions, bus.MaxPartitions)
	case l.Groups > l.Partitions:
		return fmt.Errorf("%w: stream groups %d: more than the %d partitions (each group holds at least one partition)", ErrInvalidLayout, l.Groups, l.Partitions)
	}
	return nil
}

// Names returns the bus names of l, with its defaults: the prefix, stream
// groups and partitions the roles name. The error wraps ErrInvalidLayout.
func (l Layout) Names() (bus.Names, error) {
	l = l.withDefaults()
	n, err := bus.NewNames(l.Prefix)
	if err == nil {
		n, err = n.WithPartitions(l.Partitions)
	}
	if err == nil {
		n, err = n.WithGroups(l.Groups)
	}
	if err != nil {
		return bus.Names{}, fmt.Errorf("%w: %w", ErrInvalidLayout, err)
	}
	return n, nil
}

// Rule is one entry of a permission list: subjects, and why the role has
// them (empty: the subjects say it).
type Rule struct {
	Subjects []string
	Why      string
}

// Permissions are a user's: the subjects it may publish to, those it may
// not (deny wins over allow), and those it may subscribe to. Everything
// else is refused.
type Permissions struct {
	Publish, DenyPublish, Subscribe []Rule
}

// subjects flattens rules.
func subjects(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Subjects...)
	}
	return out
}

// PublishSubjects, DenyPublishSubjects and SubscribeSubjects are the
// permissions' subjects, in order.
func (p Permissions) PublishSubjects() []string     { return subjects(p.Publish) }
func (p Permissions) DenyPublishSubjects() []string { return subjects(p.DenyPublish) }
func (p Permissions) SubscribeSubjects() []string   { return subjects(p.Subscribe) }

// User is one user of the account: its name, the server environment
// variable that holds its password in the server configuration, and its
// permissions (nil: everything in the account).
type User struct {
	Name        string
	PasswordEnv string
	Permissions *Permissions
}

// Account is the name of the account the roles create.
const Account = "EA"

// Roles are the users of one layout, and the account subject mapping the
// layout needs (none with one stream group).
type Roles struct {
	Layout Layout // with its defaults
	Users  []User // client, node, supervisor, admin
	// MappingSource and MappingDestination: the account mapping of
	// mailboxes with stream groups ([bus.Names.MailboxMapping]); empty
	// with one group.
	MappingSource, MappingDestination string
}

// User returns the user called name.
func (r Roles) User(name string) (User, bool) {
	for _, u := range r.Users {
		if u.Name == name {
			return u, true
		}
	}
	return User{}, false
}

// For returns the roles of layout l.
func For(l Layout) (Roles, error) {
	if err := l.Validate(); err != nil {
		return Roles{}, err
	}
	l = l.withDefaults()
	n, err := l.Names()
	if err != nil {
		return Roles{}, err
	}
	r := Roles{Layout: l}
	if n.Groups() > 1 {
		r.MappingSource, r.MappingDestination = n.MailboxMapping()
	}
	b := builder{n: n, p: n.Prefix() + ".", grouped: n.Groups() > 1}
	client, node, sup := b.client(), b.node(), b.supervisor()
	r.Users = []User{
		{Name: "client", PasswordEnv: "EA_CLIENT_PASSWORD", Permissions: &client},
		{Name: "node", PasswordEnv: "EA_NODE_PASSWORD", Permissions: &node},
		{Name: "supervisor", PasswordEnv: "EA_SUPERVISOR_PASSWORD", Permissions: &sup},
		{Name: "admin", PasswordEnv: "EA_ADMIN_PASSWORD"},
	}
	return r, nil
}

// builder builds the permissions from the names.
type builder struct {
	n       bus.Names
	p       string // prefix and dot
	grouped bool
}

// mailbox is the subject pattern of a mailbox of kind ("*": any) as
// permissions see it: with stream groups the account mapping has added the
// partition token before permissions are checked.
func (b builder) mailbox(kind string) string {
	if b.grouped {
		return b.p + "mbox.*." + kind + ".*"
	}
	return b.p + "mbox." + kind + ".*"
}

// outbox is the subject pattern of the outboxes of kind: with stream groups
// the runtime publishes outputs with the partition token.
func (b builder) outbox(kind string) string {
	if b.grouped {
		return b.p + "out.*." + kind + ".*"
	}
	return b.p + "out." + kind + ".*"
}

func (b builder) mailboxRule(why string) Rule {
	if b.grouped {
		why += "; published as " + b.p + "mbox.<kind>.<id>, checked as " + b.p + "mbox.<partition>.<kind>.<id>, what the account mapping makes of it"
	}
	return Rule{Subjects: []string{b.mailbox("*")}, Why: why}
}

func (b builder) client() Permissions {
	var p Permissions
	p.Publish = []Rule{
		b.mailboxRule("a record to a mailbox (exactly <kind>.<id>)"),
		{Subjects: []string{b.p + "ctl.>"}, Why: "control endpoints: create, terminate, reset, state"},
		{Subjects: []string{b.p + "orch.>"}, Why: "orchestration endpoints: start, status, input, cancel"},
		{Subjects: []string{b.p + "store.>"}, Why: "record store queries"},
		{Subjects: []string{"$SRV.PING", "$SRV.PING.>", "$SRV.INFO", "$SRV.INFO.>", "$SRV.STATS", "$SRV.STATS.>"}, Why: "discovery of the micro services"},
	}
	for _, s := range b.n.OutboxStreams() {
		p.Publish = append(p.Publish, Rule{Why: "outbox stream " + s + ": follow outboxes (ordered consumers)", Subjects: []string{
			"$JS.API.STREAM.INFO." + s,
			"$JS.API.CONSUMER.CREATE." + s + ".*.>", "$JS.API.CONSUMER.INFO." + s + ".*",
			"$JS.API.CONSUMER.MSG.NEXT." + s + ".*", "$JS.API.CONSUMER.DELETE." + s + ".*",
		}})
	}
	for g := range b.n.Groups() {
		s := "KV_" + b.n.StateBucketOf(g)
		p.Publish = append(p.Publish, Rule{Why: "state bucket " + b.n.StateBucketOf(g) + ": read and watch state documents", Subjects: []string{
			"$JS.API.STREAM.INFO." + s,
			"$JS.API.DIRECT.GET." + s, "$JS.API.DIRECT.GET." + s + ".>", "$JS.API.STREAM.MSG.GET." + s,
			"$JS.API.CONSUMER.CREATE." + s + ".*.>", "$JS.API.CONSUMER.INFO." + s + ".*",
			"$JS.API.CONSUMER.MSG.NEXT." + s + ".*", "$JS.API.CONSUMER.DELETE." + s + ".*",
		}})
	}
	p.DenyPublish = []Rule{{
		Subjects: []string{b.mailbox(supervisor.MailboxKind), b.mailbox(supervisor.TimerKind)},
		Why: "mailboxes of the runtime's own kinds: results and timers of orchestrations come from workers and supervisors only " +
			"(a client drives orchestrations through " + b.p + "orch.*), so their EA-From is not a client's claim",
	}}
	var index []string
	for _, s := range b.n.OutboxStreams() {
		index = append(index, "$JS.API.CONSUMER.CREATE."+s+"."+store.IndexerName+".>", "$JS.API.CONSUMER.DELETE."+s+"."+store.IndexerName)
	}
	p.DenyPublish = append(p.DenyPublish, Rule{Subjects: index, Why: "the record store's durable consumer: a client may not redefine it"})
	p.Subscribe = []Rule{{Subjects: []string{"_INBOX.>", b.n.Outboxes()}, Why: "replies, and outboxes with core subscriptions"}}
	return p
}

func (b builder) node() Permissions {
	var p Permissions
	state := []string{}
	for g := range b.n.Groups() {
		state = append(state, "$KV."+b.n.StateBucketOf(g)+".>")
	}
	p.Publish = []Rule{
		{Subjects: []string{b.p + ">", "_INBOX.>", "$SRV.>"}},
		{Subjects: state, Why: "state documents"},
		{Subjects: []string{"$KV." + b.n.PlaceBucket() + ".>", "$KV." + b.n.KeyBucket() + ".>"}, Why: "placement, and the output id key"},
		{Subjects: []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"}},
	}
	purge := func(streams ...string) []string {
		out := make([]string, len(streams))
		for i, s := range streams {
			out[i] = "$JS.API.STREAM.PURGE." + s
		}
		return out
	}
	streams := append(b.n.MailboxStreams(), b.n.OutboxStreams()...)
	streams = append(streams, b.n.DeadStream())
	for g := range b.n.Groups() {
		streams = append(streams, "KV_"+b.n.StateBucketOf(g))
	}
	streams = append(streams, b.n.OrchStream(), "KV_"+b.n.PlaceBucket(), "KV_"+b.n.KeyBucket())
	p.DenyPublish = []Rule{
		{Subjects: []string{"$KV." + b.n.OrchBucket() + ".>", "$JS.API.STREAM.DELETE.>"}},
		{Subjects: purge(streams...), Why: "the runtime's streams are never purged by a node (a graph's checkpoint bucket may be: graph/kvsaver trims its history)"},
	}
	if b.grouped {
		p.DenyPublish = append(p.DenyPublish, Rule{
			Subjects: purge(b.n.MailboxStream(), b.n.OutboxStream(), b.n.StateStream()),
			Why:      "nor are the one-stream layout's, which keep their records after a move to stream groups",
		})
	}
	p.Subscribe = []Rule{
		{Subjects: []string{b.p + ">", "_INBOX.>", "$SRV.>"}},
		{Subjects: []string{b.n.StreamLeaderElected()}, Why: "a stream leader's election ends the wait for writes sent to the old leader (bus.Conn.FollowElections)"},
	}
	return p
}

func (b builder) supervisor() Permissions {
	var p Permissions
	p.Publish = []Rule{
		b.mailboxRule("tasks to workers, timers to themselves"),
		{Subjects: []string{b.p + "ctl.>", b.p + "orch.>"}},
		{Subjects: []string{b.outbox(supervisor.MailboxKind)}, Why: "status records of orchestrations, in their own outboxes"},
		{Subjects: []string{"_INBOX.>", "$SRV.>"}},
		{Subjects: []string{b.p + "timer.set." + supervisor.TimerKind + ".>"}, Why: "task timeouts: durable timers (docs/timers.md)"},
		{Subjects: []string{"$KV." + b.n.OrchBucket() + ".>", "$KV." + b.n.KeyBucket() + ".>"}, Why: "orchestration state, and the output id key that signs task ids"},
		{Subjects: []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"}},
	}
	p.DenyPublish = []Rule{{Subjects: []string{"$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.MSG.DELETE.>"}}}
	p.Subscribe = []Rule{{Subjects: []string{b.p + "orch.>", "_INBOX.>", "$SRV.>"}}}
	if b.grouped {
		p.Subscribe = append(p.Subscribe, Rule{
			Subjects: []string{b.p + "mbox.*._probe.*"},
			Why:      "provisioning checks the account mapping with a probe it reads back as " + b.p + "mbox.<partition>._probe.<random>",
		})
	}
	return p
}

//go:embed server.conf.tmpl
var serverTemplate string

//go:embed nsc.sh.tmpl
var nscTemplate string

var templates = template.Must(template.New("server.conf").Funcs(template.FuncMap{
	"rules":  confRules,
	"commas": func(rules []Rule) string { return strings.Join(subjects(rules), ",") },
	"upper":  strings.ToUpper,
}).Parse(serverTemplate))

func init() { template.Must(templates.New("nsc.sh").Parse(nscTemplate)) }

// view is what the templates see.
type view struct {
	Roles
	Account                  string
	Client, Node, Supervisor User
}

func (r Roles) view() view {
	v := view{Roles: r, Account: Account}
	v.Client, _ = r.User("client")
	v.Node, _ = r.User("node")
	v.Supervisor, _ = r.User("supervisor")
	return v
}

// WriteServerConfig writes the roles as a nats-server configuration: the
// account EA with JetStream, its users with their permissions (passwords
// from the server's environment), and with stream groups the account's
// mailbox mapping.
func (r Roles) WriteServerConfig(w io.Writer) error {
	if err := templates.ExecuteTemplate(w, "server.conf", r.view()); err != nil {
		return fmt.Errorf("roles: write the server configuration: %w", err)
	}
	return nil
}

// WriteNSC writes the roles as a POSIX shell script that creates them with
// nsc (NATS operators and accounts, JWT): the account, its mapping with
// stream groups, the users and their .creds files.
func (r Roles) WriteNSC(w io.Writer) error {
	if err := templates.ExecuteTemplate(w, "nsc.sh", r.view()); err != nil {
		return fmt.Errorf("roles: write the nsc script: %w", err)
	}
	return nil
}

// confRules formats rules as the entries of a nats-server configuration
// list, indented by indent spaces: each rule's reason as a comment, its
// subjects quoted, several to a line.
func confRules(indent int, rules []Rule) string {
	const width, commentWidth = 100, 80
	pad := strings.Repeat(" ", indent)
	var sb strings.Builder
	for _, r := range rules {
		if r.Why != "" {
			for _, line := range wrap(r.Why, commentWidth-indent-2) {
				sb.WriteString(pad + "# " + line + "\n")
			}
		}
		line := pad
		for _, s := range r.Subjects {
			entry := `"` + s + `",`
			if line != pad && len(line)+1+len(entry) > width {
				sb.WriteString(line + "\n")
				line = pad
			}
			if line != pad {
				line += " "
			}
			line += entry
		}
		sb.WriteString(line + "\n")
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// wrap splits text into lines of at most width characters (a longer word
// has a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
