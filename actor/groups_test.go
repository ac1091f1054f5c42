package actor_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

// groupLoads is per records for each of refs, round-robin, with fixed ids.
func groupLoads(refs []records.Ref, per int) []clusterLoad {
	var loads []clusterLoad
	for range per {
		for _, r := range refs {
			loads = append(loads, clusterLoad{to: r, id: records.NewID()})
		}
	}
	return loads
}

// checkGroupPlacement fails t unless each ref's state document is in its
// group's bucket and in no other, and the groups used are more than one.
func checkGroupPlacement(t *testing.T, conn *bus.Conn, refs []records.Ref) {
	t.Helper()
	n := conn.Names()
	buckets, err := conn.StateBuckets(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, r := range refs {
		for g, b := range buckets {
			_, err := b.Get(ctxT(t), n.StateKey(r))
			switch {
			case g == n.GroupOf(r) && err != nil:
				t.Fatalf("%s: no state document in its group's bucket %s: %v", r, n.StateBucketOf(g), err)
			case g != n.GroupOf(r) && !errors.Is(err, jetstream.ErrKeyNotFound):
				t.Fatalf("%s: state document in bucket %s of group %d, not its group %d (%v)", r, n.StateBucketOf(g), g, n.GroupOf(r), err)
			}
		}
		used[n.GroupOf(r)] = true
	}
	if len(used) < 2 {
		t.Fatalf("the effectors are all in group(s) %v: the test proves nothing", used)
	}
}

// TestGroupsOneServer: stream groups on a single server (the node's default
// is an embedded one) drive counters through mailboxes exactly: every count
// exact, every output once, each state document in its group's bucket.
func TestGroupsOneServer(t *testing.T) {
	t.Parallel()
	const (
		counters = 24
		per      = 20
	)
	srv := bustest.NewServer(t)
	srv.MapPartitions(t, 8)
	cfg := bus.Config{Partitions: 8, Groups: 4}
	conn := srv.Connect(t, cfg)
	if conn.Names().Groups() != 4 {
		t.Fatalf("groups %d", conn.Names().Groups())
	}
	startNode(t, srv.Connect(t, cfg), nil)
	c := newClient(t, conn)
	refs := createCounters(t, c, counters)
	var acked atomic.Int64
	if err := publishResilient(conn, groupLoads(refs, per), 4, time.Now().Add(60*time.Second), &acked); err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		waitCountOnly(t, c, r, per, 60*time.Second)
	}
	outs := outboxes(t, conn, "counter")
	for _, r := range refs {
		if got := len(outs[r.String()]); got != per {
			t.Fatalf("%s: %d outputs, want %d", r, got, per)
		}
	}
	checkGroupPlacement(t, conn, refs)
	checkGroupOutboxes(t, conn, c, refs, per)

	// A publish that bypasses the mapping naming another partition than
	// its effector's is stored in the group of the partition it names and
	// dead-lettered by that partition's reader, never applied.
	forged := refs[0]
	wrong := (conn.Names().Partition(forged) + 1) % conn.Names().Partitions()
	rec, err := records.New("inc", nil)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := conn.JetStream().PublishMsg(ctxT(t), rec.Msg(fmt.Sprintf("ea.mbox.%d.%s.%s", wrong, forged.Kind, forged.ID)))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != conn.Names().PartitionStream(wrong) {
		t.Fatalf("forged record stored in %s, want %s", ack.Stream, conn.Names().PartitionStream(wrong))
	}
	dl := waitDead(t, c, forged, 0, 1, "bad_subject")
	if dl[0].Seq != ack.Sequence || dl[0].Stream != ack.Stream {
		t.Fatalf("dead letter of seq %d of %s, want %d of %s", dl[0].Seq, dl[0].Stream, ack.Sequence, ack.Stream)
	}
	if got := count(t, c, forged); got != per {
		t.Fatalf("count of %s is %d after a forged record, want %d", forged, got, per)
	}
	// Replay reads each effector's records from its group's stream.
	replayed := map[int]bool{}
	for _, r := range refs[:8] {
		rep, err := c.Replay(ctxT(t), r)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Equal || rep.Applied != per {
			t.Fatalf("replay of %s (group %d): %+v, want equal with %d applied", r, conn.Names().GroupOf(r), rep, per)
		}
		replayed[conn.Names().GroupOf(r)] = true
	}
	if len(replayed) < 2 {
		t.Fatalf("replayed effectors of groups %v only", replayed)
	}
	var stored uint64
	for g := range 4 {
		s, err := conn.MailboxStreamOf(ctxT(t), g)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		stored += info.State.Msgs
	}
	if stored != counters*per+1 {
		t.Fatalf("the group streams hold %d records, want %d", stored, counters*per+1)
	}
}

// checkGroupOutboxes fails t unless each ref's per outputs are in its
// group's outbox stream alone, under its grouped outbox subject, and the
// client's subscriptions read them there: Subscribe one effector's,
// SubscribeKind every group's (FromSeq refused: a sequence is one stream's).
func checkGroupOutboxes(t *testing.T, conn *bus.Conn, c *actor.Client, refs []records.Ref, per int) {
	t.Helper()
	n := conn.Names()
	for _, r := range refs {
		for g, name := range n.OutboxStreams() {
			s, err := conn.OutboxStreamOf(ctxT(t), g)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctxT(t), jetstream.WithSubjectFilter(n.Prefix()+".out.*."+r.Kind+"."+r.ID))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]uint64{}
			if g == n.GroupOf(r) {
				want[n.Outbox(r)] = uint64(per)
			}
			if !maps.Equal(info.State.Subjects, want) {
				t.Fatalf("%s's outputs in %s (group %d): %v, want %v", r, name, g, info.State.Subjects, want)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 30*time.Second)
	defer cancel()
	one, err := c.Subscribe(ctx, refs[0], actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rec, err := range one {
		if err != nil {
			t.Fatal(err)
		}
		if rec.From != refs[0] || rec.Subject != n.Outbox(refs[0]) {
			t.Fatalf("subscription to %s yields a record from %s on %s", refs[0], rec.From, rec.Subject)
		}
		if got++; got == per {
			break
		}
	}
	if got != per {
		t.Fatalf("subscription to %s: %d records, want %d (%v)", refs[0], got, per, ctx.Err())
	}
	if _, err := c.SubscribeKind(ctx, "counter", actor.FromSeq(5)); !errors.Is(err, actor.ErrInvalid) {
		t.Fatalf("SubscribeKind FromSeq with groups: %v, want ErrInvalid", err)
	}
	kind, err := c.SubscribeKind(ctx, "counter", actor.FromStart())
	if err != nil {
		t.Fatal(err)
	}
	from := map[records.Ref]int{}
	for rec, err := range kind {
		if err != nil {
			t.Fatal(err)
		}
		from[rec.From]++
		if len(from) == len(refs) && total(from) == len(refs)*per {
			break
		}
	}
	for _, r := range refs {
		if from[r] != per {
			t.Fatalf("SubscribeKind over %d groups: %d records from %s, want %d (%v)", n.Groups(), from[r], r, per, ctx.Err())
		}
	}
}

func total(m map[records.Ref]int) int {
	sum := 0
	for _, v := range m {
		sum += v
	}
	return sum
}

// clusterGroups is the stream group count of the cluster tests: one
// mailbox stream and one state bucket per server of the 3-server cluster.
const clusterGroups = 3

// checkLeadersSpread fails t unless the leaders of the groups' streams share
// the writes evenly: each record is a write to its group's mailbox stream,
// outbox stream and state bucket, so each of a group's streams weighs its
// share of the partitions; no server may lead more than a third of the
// total plus one group's weight (what placing one stream at a time can
// leave), where three servers leading at random can reach twice that.
func checkLeadersSpread(t *testing.T, cl *bustest.Cluster, names bus.Names) {
	t.Helper()
	if err := leadersSpread(t, cl, names); err != nil {
		t.Fatal(err)
	}
}

// leadersSpread is checkLeadersSpread's test, returning what is wrong.
func leadersSpread(t *testing.T, cl *bustest.Cluster, names bus.Names) error {
	t.Helper()
	leaders := groupLeaders(t, cl, names)
	load := map[string]float64{}
	var most float64
	for g := range names.Groups() {
		w := float64(len(names.GroupPartitions(g))) / float64(names.Partitions())
		load[leaders[names.MailboxStreamOf(g)]] += w
		load[leaders[names.OutboxStreamOf(g)]] += w
		load[leaders["KV_"+names.StateBucketOf(g)]] += w
		most = max(most, w)
	}
	t.Logf("leaders %v; share of the writes each server leads %v", leaders, load)
	for server, l := range load {
		if l > 1+most+1e-9 {
			return fmt.Errorf("%s leads %.3f of the 3 writes of a record, more than 1 + %.3f: the leaders did not spread (%v)", server, l, most, leaders)
		}
	}
	if len(load) != 3 {
		return fmt.Errorf("%d servers lead the streams, want all 3 (%v)", len(load), leaders)
	}
	return nil
}

// groupLeaders returns, for each stream of names (mailbox and outbox
// streams and state buckets' streams), the server leading it.
func groupLeaders(t *testing.T, cl *bustest.Cluster, names bus.Names) map[string]string {
	t.Helper()
	leaders := map[string]string{}
	for _, s := range append(names.MailboxStreams(), names.OutboxStreams()...) {
		leaders[s] = cl.StreamLeader(t, s).Name
	}
	for _, b := range names.StateBuckets() {
		leaders["KV_"+b] = cl.StreamLeader(t, "KV_"+b).Name
	}
	return leaders
}

// TestClusterGroupLeaderDies runs two nodes against a 3-server NATS cluster
// with 3 stream groups, every stream and bucket in 3 replicas. The leaders of
// the groups' streams and of the outbox stream share the writes evenly. While a
// plain publisher drives 30 counters, the server leading group 0's mailbox
// stream stops; the other groups go on, group 0 gets a new leader, and at the
// end every count is exact and every output is on its outbox once. Then the
// stopped server comes back, and the nodes spread the leaders again
// (Options.SpreadLeaders) with no node restarting.
// Not parallel, like TestClusterStreamLeaderDies.
func TestClusterGroupLeaderDies(t *testing.T) {
	const (
		counters = 30
		per      = 60
	)
	start := time.Now()
	cl := bustest.NewCluster(t, 3)
	names, _ := bus.NewNames("ea")
	names, _ = names.WithPartitions(clusterPartitions)
	cl.MapMailboxes(t, names)
	cfg := bus.Config{Replicas: 3, Partitions: clusterPartitions, Groups: clusterGroups}
	conn := cl.Connect(t, cfg)
	names = conn.Names()
	if names.Groups() != clusterGroups {
		t.Fatalf("groups %d", names.Groups())
	}
	checkLeadersSpread(t, cl, names)
	c := newClient(t, conn)
	var nodes []*runningNode
	opts := clusterPlacement
	opts.SpreadLeaders = time.Second
	for range 2 {
		nodes = append(nodes, startNodeWith(t, cl.Connect(t, cfg), opts, nil))
	}
	refs := createCounters(t, c, counters)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Log(n.Debug())
			}
		}
	})
	leaderDeath{
		cluster: cl, conn: conn, client: c, nodes: nodes,
		stream: names.MailboxStreamOf(0), loads: groupLoads(refs, per), refs: refs, per: per,
		publishFor: 60 * time.Second, settle: 90 * time.Second,
	}.run(t)
	checkGroupPlacement(t, conn, refs)

	// The stopped server back: its replicas catch up, and the nodes move
	// leaders to it, one at a time, until the writes are spread again.
	for _, s := range cl.Servers {
		if !s.Running() {
			s.Restart(t)
		}
	}
	back := time.Now()
	var err error
	for deadline := back.Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if err = leadersSpread(t, cl, names); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("a minute after the stopped server came back: %v", err)
	}
	var moves float64
	for _, n := range nodes {
		moves += metricSum(t, n.Registry, "ea_placement_leader_moves_total")
	}
	if moves == 0 {
		t.Fatal("the leaders spread again but no node moved one: the test proves nothing")
	}
	t.Logf("leaders spread again %s after the stopped server came back (%v leader moves); %s in all",
		time.Since(back).Round(time.Millisecond), moves, time.Since(start).Round(time.Millisecond))
}

// upgradeEnv is where an upgrade test runs: a NATS server or cluster.
type upgradeEnv struct {
	url      string                                     // every server's client URL
	replicas int                                        // of streams and buckets
	connect  func(t *testing.T, c bus.Config) *bus.Conn // connected and provisioned
	mapping  func(t *testing.T, n bus.Names)            // adds the mailbox mapping everywhere
}

// TestGroupsUpgradeFromOneStream: a deployment provisioned with one mailbox
// stream moves to 4 stream groups with records left unapplied by a node
// stopped mid-load; after bus.Conn.MigrateGroups and a node on the groups,
// and records published through the mapping after, every count is exact
// and every output is on its outbox once.
func TestGroupsUpgradeFromOneStream(t *testing.T) {
	t.Parallel()
	srv := bustest.NewServer(t)
	upgradeFromOneStream(t, upgradeEnv{
		url: srv.URL, replicas: 1,
		connect: func(t *testing.T, c bus.Config) *bus.Conn { return srv.Connect(t, c) },
		mapping: func(t *testing.T, n bus.Names) { srv.MapMailboxes(t, n) },
	}, 4)
}

// TestClusterGroupsUpgrade is TestGroupsUpgradeFromOneStream on a 3-server
// cluster, every stream and bucket in 3 replicas, to 3 groups led by three
// servers. Not parallel, like TestClusterStreamLeaderDies.
func TestClusterGroupsUpgrade(t *testing.T) {
	cl := bustest.NewCluster(t, 3)
	upgradeFromOneStream(t, upgradeEnv{
		url: cl.URL(), replicas: 3,
		connect: func(t *testing.T, c bus.Config) *bus.Conn { return cl.Connect(t, c) },
		mapping: func(t *testing.T, n bus.Names) { cl.MapMailboxes(t, n) },
	}, clusterGroups)
	names, _ := bus.NewNames("ea")
	names, _ = names.WithPartitions(8)
	names, _ = names.WithGroups(clusterGroups)
	checkLeadersSpread(t, cl, names)
}

func upgradeFromOneStream(t *testing.T, env upgradeEnv, groups int) {
	const (
		counters = 20
		before   = 30 // per counter, published to the one stream
		after    = 10 // per counter, published to the groups
	)
	one := bus.Config{Partitions: 8, Replicas: env.replicas}
	conn := env.connect(t, one)
	node := startNode(t, env.connect(t, one), nil)
	c := newClient(t, conn)
	refs := createCounters(t, c, counters)
	var acked atomic.Int64
	published := make(chan error, 1)
	go func() {
		published <- publishResilient(conn, groupLoads(refs, before), 2, time.Now().Add(60*time.Second), &acked)
	}()
	actortest.Eventually(t, 30*time.Second, "some records processed", func() bool {
		return metricSum(t, node.Registry, "ea_records_processed_total") >= counters*before/4
	})
	node.Stop(t)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	var applied int64
	for _, r := range refs {
		applied += count(t, c, r)
	}
	t.Logf("%d of %d records applied before the migration", applied, counters*before)
	if applied == counters*before {
		t.Fatal("every record was applied before the migration: the test proves nothing")
	}

	// The upgrade: the mapping on the server, then the migration.
	names, _ := bus.NewNames("ea")
	names, _ = names.WithPartitions(8)
	env.mapping(t, names)
	grouped := bus.Config{Partitions: 8, Groups: groups, Replicas: env.replicas, URL: env.url}
	mc, err := bus.Connect(ctxT(t), grouped)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mc.Close() }()
	if err := mc.Provision(ctxT(t)); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("provision groups over one stream before migrating: %v, want it refused", err)
	}
	if err := mc.MigrateGroups(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := mc.MigrateGroups(ctxT(t)); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if err := mc.Provision(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var copied uint64
	for g := range groups {
		s, err := mc.MailboxStreamOf(ctxT(t), g)
		if err != nil {
			t.Fatal(err)
		}
		copied += s.CachedInfo().State.Msgs
	}
	if want := uint64(counters*before) - uint64(applied); copied != want {
		t.Fatalf("%d records copied to the groups, want the %d not applied", copied, want)
	}

	gconn := env.connect(t, bus.Config{}) // adopts the groups
	if gconn.Names().Groups() != groups {
		t.Fatalf("a connection that does not say adopts %d groups, want %d", gconn.Names().Groups(), groups)
	}
	startNode(t, env.connect(t, bus.Config{}), nil)
	gc := newClient(t, gconn)
	if err := publishResilient(gconn, groupLoads(refs, after), 2, time.Now().Add(60*time.Second), &acked); err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		waitCountOnly(t, gc, r, before+after, 60*time.Second)
	}
	outs := outboxes(t, gconn, "counter")
	for _, r := range refs {
		if got := len(outs[r.String()]); got != before+after {
			t.Fatalf("%s: %d outputs, want %d", r, got, before+after)
		}
	}
	checkGroupPlacement(t, gconn, refs)
	// The one outbox stream is retired with the outputs from before the
	// move; the groups' outbox streams hold every output since.
	retired, err := gconn.JetStream().Stream(ctxT(t), names.OutboxStream())
	if err != nil {
		t.Fatal(err)
	}
	if sc, st := retired.CachedInfo().Config, retired.CachedInfo().State; !slices.Equal(sc.Subjects, []string{names.RetiredOutboxes()}) || st.Msgs != uint64(applied) {
		t.Fatalf("%s after the move: subjects %q, %d outputs; want %s and the %d from before", sc.Name, sc.Subjects, st.Msgs, names.RetiredOutboxes(), applied)
	}
	if _, err := conn.OutboxStream(ctxT(t)); !errors.Is(err, bus.ErrGroupsUnsupported) || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("OutboxStream of a connection configured for one stream, after the move: %v, want it refused as retired", err)
	}
}
