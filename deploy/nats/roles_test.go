package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/examples/demo"
	"github.com/effectors/effectors/examples/kinds"
	"github.com/effectors/effectors/internal/cli"
	"github.com/effectors/effectors/internal/roles"
	"github.com/effectors/effectors/internal/testcert"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// passwords are the role users' passwords, given to the server through the
// environment as roles.conf reads them.
var passwords = map[string]string{"client": "client-pw", "node": "node-pw", "supervisor": "supervisor-pw", "admin": "admin-pw"}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rolesServer starts an embedded server with config (roles.conf, or a file
// including it) and returns it.
func rolesServer(t *testing.T, config string) *bus.Server {
	t.Helper()
	for user, pw := range passwords {
		t.Setenv("EA_"+strings.ToUpper(user)+"_PASSWORD", pw)
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: config, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	if !srv.AuthRequired() {
		t.Fatal("the roles server does not require authentication")
	}
	return srv
}

// deployment is a server running the roles of a layout: where to reach it,
// the layout's names and the options every connection takes (TLS).
type deployment struct {
	url    string
	layout roles.Layout // with its defaults
	names  bus.Names
	extra  []nats.Option
}

// deploy starts a server with the roles of layout, written by the
// generator (roles.conf itself for the default layout: it is the
// generator's output, see TestShippedRolesAreGenerated).
func deploy(t *testing.T, layout roles.Layout) deployment {
	t.Helper()
	r, err := roles.For(layout)
	if err != nil {
		t.Fatal(err)
	}
	config := "roles.conf"
	if r.Layout.Groups > 1 {
		config = filepath.Join(t.TempDir(), "roles.conf")
		writeConfig(t, config, r)
	}
	return deployment{url: rolesServer(t, config).ClientURL(), layout: r.Layout, names: layoutNames(t, r.Layout)}
}

// writeConfig writes r's server configuration to path.
func writeConfig(t *testing.T, path string, r roles.Roles) {
	t.Helper()
	var b strings.Builder
	if err := r.WriteServerConfig(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// layoutNames are the bus names of l.
func layoutNames(t *testing.T, l roles.Layout) bus.Names {
	t.Helper()
	n, err := l.Names()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// grouped reports whether d has stream groups.
func (d deployment) grouped() bool { return d.layout.Groups > 1 }

// logBuffer is a log safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// connect connects to url as user, with extra options (TLS). At the end of
// the test, the connection must not have been refused anything: a role
// that lacks a permission its binary needs fails the test.
func connect(t *testing.T, d deployment, user string) *bus.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	logs := &logBuffer{}
	t.Cleanup(func() {
		if strings.Contains(strings.ToLower(logs.String()), "permissions violation") {
			t.Errorf("the %s connection was refused something it needs:\n%s", user, logs.String())
		}
	})
	// Clients do not read the layout from the server (the client role may
	// not): every connection is told it, as ea-node's --stream-groups and
	// --partitions do.
	conn, err := bus.Connect(ctx, bus.Config{URL: d.url, Name: user, Logger: slog.New(slog.NewTextHandler(logs, nil)), ConnectTimeout: 10 * time.Second,
		Groups: d.layout.Groups, Partitions: d.layout.Partitions,
		Options: append([]nats.Option{nats.UserInfo(user, passwords[user])}, d.extra...)})
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// violations collects the permission violations the server reports to a
// raw connection.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	v.errs = append(v.errs, err.Error())
	v.mu.Unlock()
}

// has reports whether a violation of op ("publish" or "subscription") on
// subject was reported.
func (v *violations) has(op, subject string) bool {
	want := strings.ToLower(fmt.Sprintf("permissions violation for %s to %q", op, subject))
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(strings.ToLower(e), want) {
			return true
		}
	}
	return false
}

// rawClient is a plain NATS connection as user that records violations.
func rawClient(t *testing.T, d deployment, user string) (*nats.Conn, *violations) {
	t.Helper()
	v := &violations{}
	nc, err := nats.Connect(d.url, append([]nats.Option{nats.UserInfo(user, passwords[user]), nats.ErrorHandler(v.handler)}, d.extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

// refused checks that publishing to subject is refused: the server reports
// a permissions violation (and delivers nothing).
func refused(t *testing.T, nc *nats.Conn, v *violations, subject string, hdr nats.Header, body []byte) {
	t.Helper()
	refusedAs(t, nc, v, subject, subject, hdr, body)
}

// refusedAs is refused for a subject the server checks (and reports) as
// checked: what the account mapping makes of a mailbox subject with stream
// groups.
func refusedAs(t *testing.T, nc *nats.Conn, v *violations, subject, checked string, hdr nats.Header, body []byte) {
	t.Helper()
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: nc.NewRespInbox(), Header: hdr, Data: body}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 5*time.Second, "a permissions violation for publish to "+checked, func() bool { return v.has("publish", checked) })
}

// refusedSub checks that subscribing to subject is refused.
func refusedSub(t *testing.T, nc *nats.Conn, v *violations, subject string) {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	actortest.Eventually(t, 5*time.Second, "a permissions violation for subscription to "+subject, func() bool { return v.has("subscription", subject) })
}

// stack is a node (as user node, with the record store) and a supervisor
// (as user supervisor, with the demo) on srv.
func stack(t *testing.T, d deployment) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	nodeConn := connect(t, d, "node")
	if err := nodeConn.Provision(ctx); err != nil {
		t.Fatalf("provision as node: %v", err)
	}
	storeSrv, err := store.NewServer(ctx, nodeConn, store.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatalf("record store as node: %v", err)
	}
	wg.Go(func() {
		if err := storeSrv.Run(ctx); err != nil {
			t.Errorf("record store as node: %v", err)
		}
	})
	node, err := actor.NewNode(nodeConn, actor.Options{Logger: quiet, ShutdownGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Host(kinds.Counter(), kinds.Controller(), kinds.TaskA(), kinds.TaskB()); err != nil {
		t.Fatal(err)
	}
	actortest.Run(t, node)

	supConn := connect(t, d, "supervisor")
	if err := supConn.Provision(ctx); err != nil {
		t.Fatalf("provision as supervisor: %v", err)
	}
	sup, err := supervisor.New(supConn, supervisor.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	def, err := demo.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Register(def); err != nil {
		t.Fatal(err)
	}
	supDone := make(chan error, 1)
	wg.Go(func() { supDone <- sup.Run(ctx) })
	actortest.Eventually(t, 30*time.Second, "the supervisor ready", func() bool {
		select {
		case err := <-supDone:
			t.Fatalf("supervisor as supervisor stopped: %v", err)
		default:
		}
		return sup.Ready()
	})
}

// TestRoles starts a server with roles.conf and, as each user, shows each
// allowed action working and each denied one refused, including every
// attack the roles guard against.
func TestRoles(t *testing.T) {
	d := deploy(t, roles.Layout{})
	stack(t, d)
	allowedClient(t, d)
	deniedClient(t, d)
	deniedNodeAndSupervisor(t, d)
	admin(t, d)
}

// TestRolesStreamGroups is TestRoles on a deployment with stream groups,
// under the roles "ea roles --stream-groups 3" prints (64 partitions): the
// mapping in the configuration, every group's streams and buckets named in
// the permissions, mailbox and outbox subjects with their partition token.
func TestRolesStreamGroups(t *testing.T) {
	d := deploy(t, roles.Layout{Groups: 3, Partitions: 64})
	// The effectors the test reads and attacks are in more than one group,
	// and the one the client reads is not in group 0, so that permissions
	// naming one group's streams and buckets only fail it.
	groups := map[int]bool{}
	for _, r := range []records.Ref{{Kind: "counter", ID: "c1"}, {Kind: "counter", ID: "victim"}, {Kind: "controller", ID: "ctl"}} {
		groups[d.names.GroupOf(r)] = true
	}
	if len(groups) < 2 || d.names.GroupOf(records.Ref{Kind: "counter", ID: "c1"}) == 0 {
		t.Fatalf("counter/c1 in group 0, or counter/c1, counter/victim and controller/ctl all in one group of %d: choose other ids", d.layout.Groups)
	}
	stack(t, d)
	allowedClient(t, d)
	deniedClient(t, d)
	deniedNodeAndSupervisor(t, d)
	admin(t, d)
}

// TestRolesBcrypt gives the server bcrypt hashes of the passwords instead
// of the passwords (no plaintext password in its environment): every user
// connects with its password, and the hash itself is no password.
func TestRolesBcrypt(t *testing.T) {
	for user, pw := range passwords {
		hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("EA_"+strings.ToUpper(user)+"_PASSWORD", string(hash))
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), ConfigFile: "roles.conf", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for user, pw := range passwords {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, pw))
		if err != nil {
			t.Fatalf("%s with its password: %v", user, err)
		}
		nc.Close()
		hash := os.Getenv("EA_" + strings.ToUpper(user) + "_PASSWORD")
		if nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, hash), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatalf("%s connected with the hash as its password", user)
		}
	}
}

// allowedClient: as client, create an effector, send it records, read its
// state, follow its outbox, run an orchestration, query the record store.
func allowedClient(t *testing.T, d deployment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connect(t, d, "client")
	c, err := actor.NewClient(ctx, conn)
	if err != nil {
		t.Fatalf("client as client: %v", err)
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	if _, err := c.Create(ctx, c1, nil); err != nil {
		t.Fatalf("create as client: %v", err)
	}
	out, err := c.Subscribe(ctx, c1)
	if err != nil {
		t.Fatalf("follow an outbox as client: %v", err)
	}
	by := int64(2)
	rec, _ := records.New("inc", kinds.Inc{By: &by})
	sent, err := c.Send(ctx, c1, rec)
	if err != nil {
		t.Fatalf("send as client: %v", err)
	}
	for emitted, err := range out {
		if err != nil {
			t.Fatalf("outbox as client: %v", err)
		}
		var got kinds.Count
		if err := emitted.Decode(&got); err != nil || got.Count != 2 || emitted.From != c1 {
			t.Fatalf("emitted %+v (%v), want count 2 from %s", emitted, err, c1)
		}
		break
	}
	doc, err := c.StateAt(ctx, c1, sent.Seq)
	if err != nil {
		t.Fatalf("state as client: %v", err)
	}
	var st kinds.CounterState
	if err := doc.Decode(&st); err != nil || st.Count != 2 {
		t.Fatalf("state %+v (%v), want count 2", st, err)
	}

	// An orchestration, through ea.orch.* (the supervisor's mailbox is not
	// the client's to write).
	sc, err := supervisor.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	id, err := sc.Start(ctx, demo.Name, demo.Input{Text: "hello roles"})
	if err != nil {
		t.Fatalf("start an orchestration as client: %v", err)
	}
	actortest.Eventually(t, 60*time.Second, "the demo waiting for input", func() bool {
		o, err := sc.Status(ctx, id)
		return err == nil && o.Status == supervisor.StatusWaiting
	})
	if _, err := sc.Input(ctx, id, demo.Note{Note: "ok"}); err != nil {
		t.Fatalf("input as client: %v", err)
	}
	var o supervisor.Orchestration
	actortest.Eventually(t, 60*time.Second, "the demo completed", func() bool {
		o, err = sc.Status(ctx, id)
		return err == nil && o.Status.Final()
	})
	if o.Status != supervisor.StatusCompleted {
		t.Fatalf("demo %s: %s", o.Status, o.Error)
	}

	// The record store over NATS.
	actortest.Eventually(t, 30*time.Second, "the record store to find c1's records", func() bool {
		msg, err := conn.NATS().RequestWithContext(ctx, "ea.store.count", []byte(`{"effector":"counter/c1"}`))
		if err != nil {
			t.Fatalf("store query as client: %v", err)
		}
		var n struct{ Count int }
		return json.Unmarshal(msg.Data, &n) == nil && n.Count >= 2
	})
	// The orchestration's story: the supervisor wrote its status records to
	// ea.out.supervisor.<id>, ending COMPLETED.
	actortest.Eventually(t, 30*time.Second, "the orchestration's status records", func() bool {
		msg, err := conn.NATS().RequestWithContext(ctx, "ea.store.query", []byte(`{"process":"`+id+`","type":"status"}`))
		if err != nil {
			t.Fatalf("store query as client: %v", err)
		}
		var p struct {
			Records []struct {
				JSON struct{ Status string } `json:"json"`
			} `json:"records"`
		}
		return json.Unmarshal(msg.Data, &p) == nil && len(p.Records) == 4 && p.Records[3].JSON.Status == "COMPLETED"
	})
}

// deniedClient: every attack the roles guard against, as client, refused by the server
// or, for what the roles cannot refuse, harmless.
func deniedClient(t *testing.T, d deployment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := d.names
	nc, v := rawClient(t, d, "client")
	admin := connect(t, d, "admin")
	ac, err := actor.NewClient(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	victim := records.Ref{Kind: "counter", ID: "victim"}
	if _, err := ac.Create(ctx, victim, kinds.CounterState{Count: 3}); err != nil {
		t.Fatal(err)
	}
	doc := func() []byte { return []byte(`{"id":"victim","kind":"counter","status":"IDLE","state":{"count":0}}`) }
	inc, _ := records.New("inc", nil)

	// Writes to state, outboxes, dead letters, the index, other streams.
	writes := []string{
		n.StateSubject(victim), "$KV.ea_place.node.x", "$KV.ea_orch.x", "$KV.ea_keys.output-id",
		n.Outbox(victim), "ea.out.counter.victim", "ea.dead.counter.victim", "ea.idx.id.x",
	}
	if d.grouped() {
		// Every group's state bucket, not only the victim's; and subjects
		// that are not mailboxes (finding 5): with stream groups a stored
		// mailbox subject (ea.mbox.<p>.<kind>.<id>) looks like the mapped
		// subjects a client may publish (docs/layout.md says what becomes
		// of it), one more token does not.
		for g := range n.Groups() {
			writes = append(writes, "$KV."+n.StateBucketOf(g)+".counter.victim")
		}
		writes = append(writes, "ea.mbox.3.counter.victim.extra", "ea.mbox.3.supervisor.x", "ea.mbox.3.supervisor-timer.x")
	} else {
		writes = append(writes, "ea.mbox.3.counter.victim", "ea.mbox.counter.victim.extra") // not mailboxes (finding 5)
	}
	for _, subject := range writes {
		refused(t, nc, v, subject, inc.Msg(subject).Header, doc())
	}
	// The runtime's own mailboxes, refused as the server checks them: after
	// the account mapping with stream groups.
	for _, r := range []records.Ref{{Kind: "supervisor", ID: "x"}, {Kind: "supervisor-timer", ID: "x"}} {
		checked := n.Mailbox(r)
		if d.grouped() {
			checked = n.StoredMailbox(r)
		}
		refusedAs(t, nc, v, n.Mailbox(r), checked, inc.Msg(n.Mailbox(r)).Header, doc())
	}
	// The JetStream API beyond reading.
	var api []string
	for g := range n.Groups() {
		mbox, out, state := n.MailboxStreamOf(g), n.OutboxStreamOf(g), "KV_"+n.StateBucketOf(g)
		api = append(api,
			"$JS.API.STREAM.PURGE."+state, "$JS.API.STREAM.PURGE."+mbox, "$JS.API.STREAM.PURGE."+out,
			"$JS.API.STREAM.DELETE."+mbox, "$JS.API.STREAM.UPDATE."+mbox, "$JS.API.STREAM.MSG.DELETE."+mbox,
			"$JS.API.CONSUMER.DELETE."+mbox+"."+n.PartitionConsumer("counter", g), "$JS.API.CONSUMER.CREATE."+mbox+".x.ea.mbox.>",
			"$JS.API.CONSUMER.CREATE."+out+"."+store.IndexerName+".ea.out.>", "$JS.API.CONSUMER.DELETE."+out+"."+store.IndexerName,
		)
	}
	api = append(api,
		"$JS.API.STREAM.PURGE.EA_DEAD", "$JS.API.STREAM.CREATE.EVIL",
		// The output id key: reading it would let a client forge output ids.
		"$JS.API.DIRECT.GET.KV_ea_keys.$KV.ea_keys.output-id", "$JS.API.STREAM.MSG.GET.KV_ea_keys",
		"$JS.API.STREAM.INFO.KV_ea_keys", "$JS.API.CONSUMER.CREATE.KV_ea_keys.x.$KV.ea_keys.>",
		// Orchestration state and dead letters are not the client's to read.
		"$JS.API.DIRECT.GET.KV_ea_orch.$KV.ea_orch.x", "$JS.API.CONSUMER.CREATE.EA_DEAD.x.ea.dead.>",
		"$SYS.REQ.SERVER.PING",
	)
	for _, subject := range api {
		refused(t, nc, v, subject, nil, []byte(`{}`))
	}
	// Reading mailboxes and dead letters with core subscriptions.
	for _, subject := range []string{"ea.mbox.>", "ea.dead.>", "$KV.>", "ea.>"} {
		refusedSub(t, nc, v, subject)
	}

	// EA-Reply into $KV or the JetStream API: the client may publish to the
	// mailbox, but the node dead-letters the record (finding 1).
	dead, err := ac.DeadLetters(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	c1 := records.Ref{Kind: "counter", ID: "c1"}
	for _, reply := range []string{n.StateSubject(c1), "$JS.API.STREAM.PURGE." + n.StateStreamFor(c1), n.Outbox(c1)} {
		rec, _ := records.New("inc", nil)
		rec.Reply = reply
		if err := nc.PublishMsg(rec.Msg("ea.mbox.counter.victim")); err != nil {
			t.Fatal(err)
		}
	}
	deadLetters := 0
	for dl, err := range dead {
		if err != nil {
			t.Fatal(err)
		}
		if dl.Reason != "reply_forbidden" {
			t.Fatalf("dead letter %s of the victim: %s, want reply_forbidden", dl.Record.ID, dl.Reason)
		}
		if deadLetters++; deadLetters == 3 {
			break
		}
	}

	// Forged EA-From: a client can claim any sender in a kind's mailbox
	// (the roles cannot look into headers: see the README), but not in the
	// supervisors' mailboxes (refused above), so it cannot fake a worker's
	// result to an orchestration.
	forged, _ := records.New("inc", nil)
	forged.From = records.Ref{Kind: "controller", ID: "ctl"}
	if err := nc.PublishMsg(forged.Msg("ea.mbox.counter.victim")); err != nil {
		t.Fatal(err)
	}

	// A pre-published output id (finding 4): the controller's inc to the
	// victim has an id the client cannot compute; the old predictable ids
	// published first suppress nothing.
	ctl := records.Ref{Kind: "controller", ID: "ctl"}
	if _, err := ac.Create(ctx, ctl, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		zero := int64(0)
		pre, _ := records.New("inc", kinds.Inc{By: &zero})
		pre.ID = fmt.Sprintf("job-1:%d", i)
		if err := nc.PublishMsg(pre.Msg("ea.mbox.counter.victim")); err != nil {
			t.Fatal(err)
		}
	}
	start, _ := records.New("start", kinds.Start{Counter: "victim", Times: 2})
	start.ID = "job-1"
	if err := nc.PublishMsg(start.Msg("ea.mbox.controller.ctl")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// 3 at creation, +1 for the forged EA-From inc, +2 from the controller;
	// the three records with forbidden replies never ran.
	actortest.Eventually(t, 30*time.Second, "the victim's count at 6", func() bool {
		doc, err := ac.State(ctx, victim)
		var s kinds.CounterState
		if err != nil || doc.Decode(&s) != nil {
			return false
		}
		if s.Count > 6 {
			t.Fatalf("victim count %d, above 6", s.Count)
		}
		return s.Count == 6
	})
	// Nothing the client tried touched the state bucket or the streams.
	js := admin.JetStream()
	for _, stream := range []string{n.StateStreamFor(victim), n.MailboxStreamFor(victim), n.OutboxStreamFor(victim), n.DeadStream()} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s after the attacks: %v", stream, err)
		}
		if st.CachedInfo().State.Msgs == 0 {
			t.Errorf("stream %s is empty after the attacks", stream)
		}
	}
	if _, err := js.Stream(ctx, "EVIL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream EVIL: %v, want not found", err)
	}
}

// deniedNodeAndSupervisor: what nodes and supervisors may not do.
func deniedNodeAndSupervisor(t *testing.T, d deployment) {
	t.Helper()
	n := d.names
	victim := records.Ref{Kind: "counter", ID: "victim"}
	nc, v := rawClient(t, d, "node")
	denied := []string{"$KV.ea_orch.x", "$SYS.REQ.SERVER.PING"}
	for g := range n.Groups() {
		denied = append(denied, "$JS.API.STREAM.DELETE."+n.MailboxStreamOf(g), "$JS.API.STREAM.PURGE."+n.OutboxStreamOf(g),
			"$JS.API.STREAM.PURGE."+n.MailboxStreamOf(g), "$JS.API.STREAM.PURGE.KV_"+n.StateBucketOf(g))
	}
	for _, subject := range denied {
		refused(t, nc, v, subject, nil, []byte(`{}`))
	}
	nc, v = rawClient(t, d, "supervisor")
	denied = []string{
		n.StateSubject(victim), n.Outbox(victim), "ea.out.counter.victim", "ea.dead.counter.victim", "ea.idx.id.x",
		"$JS.API.STREAM.PURGE." + n.MailboxStreamFor(victim), "$JS.API.STREAM.DELETE." + n.StateStreamFor(victim),
		"$JS.API.STREAM.MSG.DELETE." + n.OutboxStreamFor(victim),
	}
	for _, subject := range denied {
		refused(t, nc, v, subject, nil, []byte(`{}`))
	}
	// Of the mailboxes, a supervisor may follow the provisioning probe's
	// only (with stream groups), not the effectors'.
	refusedSub(t, nc, v, "ea.mbox.>")
}

// admin may do what operators do: read the key bucket, purge a stream.
func admin(t *testing.T, d deployment) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, d, "admin")
	kv, err := conn.JetStream().KeyValue(ctx, "ea_keys")
	if err != nil {
		t.Fatal(err)
	}
	if ent, err := kv.Get(ctx, "output-id"); err != nil || len(ent.Value()) != bus.OutputKeySize {
		t.Fatalf("output key as admin: %v", err)
	}
	st, err := conn.JetStream().Stream(ctx, "EA_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatalf("purge as admin: %v", err)
	}
}

// TestRolesTLS is TestRoles over TLS with verified client certificates: a
// configuration that includes roles.conf and adds a tls block. Connecting
// without the CA, or without a client certificate, fails at once.
func TestRolesTLS(t *testing.T) {
	dir := t.TempDir()
	certs := testcert.New(t, dir)
	shipped, err := os.ReadFile("roles.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "roles.conf"), shipped, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "tls.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "include \"roles.conf\"\ntls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: true\n  timeout: 5\n}\n",
		certs.ServerCert, certs.ServerKey, certs.CA), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := rolesServer(t, conf)
	url := "tls://" + srv.Addr()
	layout := roles.Layout{Prefix: bus.DefaultPrefix, Groups: 1, Partitions: bus.DefaultPartitions}
	d := deployment{url: url, layout: layout, names: layoutNames(t, layout)}

	// The binaries' --tls-ca, --tls-cert, --tls-key.
	auth := cli.Auth{TLSCA: certs.CA, TLSCert: certs.ClientCert, TLSKey: certs.ClientKey}
	if err := auth.Load(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	d.extra = auth.Options()
	stack(t, d)
	allowedClient(t, d)
	deniedClient(t, d)

	for name, opts := range map[string][]nats.Option{
		"no CA":                 nil,
		"no client certificate": {nats.RootCAs(certs.CA)},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		_, err := bus.Connect(ctx, bus.Config{URL: url, Logger: quiet, ConnectTimeout: 15 * time.Second,
			Options: append([]nats.Option{nats.UserInfo("client", passwords["client"])}, opts...)})
		cancel()
		if !errors.Is(err, bus.ErrTLS) || time.Since(start) > 5*time.Second {
			t.Errorf("connect with %s: %v after %s, want bus.ErrTLS at once", name, err, time.Since(start).Round(time.Millisecond))
		}
	}
}
