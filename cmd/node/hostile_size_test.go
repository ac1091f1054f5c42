//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/internal/proctest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsErrHeaderSize is JetStream's error code for a message whose headers
// exceed 64 KiB (nats-server's JSMessageHeaderSizeExceedsLimitErr, "header
// size exceeds maximum allowed of 64k"); nats.go has no constant for it.
const jsErrHeaderSize jetstream.ErrorCode = 10097

// sizeCase is one record of TestOversizeHeadersKeepNodeConnected: header
// (or the mailbox id, for header "") set to size bytes.
type sizeCase struct {
	header string
	size   int
	id     string // the counter it is sent to
	seq    uint64 // where EA_MBOX stored it
	// valid is true when the runtime must apply the record, false when it
	// must dead-letter it, absent when either is right (the value is a
	// run of 'a', which is a valid value of some headers only).
	valid *bool
}

// TestOversizeHeadersKeepNodeConnected publishes, to a real ea-node with the
// record store on, records whose headers (each in turn) and mailbox id are
// 0, 128, 129, 1 KiB, 3 KiB, 4 KiB, 64 KiB and just under the server's
// maximum payload long. The node must stay connected and ready, every
// record must be applied or dead-lettered with its reason, the record
// store's indexer must index them all, and a record sent after them must be
// served.
//
// Before the indexer bounded its index subjects, the 3 KiB EA-Type alone
// made the server close the node's connection for good ("maximum control
// line exceeded"), and the node stayed up but disconnected forever.
func TestOversizeHeadersKeepNodeConnected(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := bustest.NewServer(t)
	conn := srv.Connect(t)
	metrics := proctest.FreeAddr(t)
	node := startNode(t, "node", metrics, "--nats", srv.URL, "--metrics", metrics, "--store", t.TempDir())
	node.waitReady(t, 30*time.Second)

	maxPayload := int(conn.NATS().MaxPayload())
	// JetStream stores headers of up to 64 KiB (with their names): the
	// largest header value it stores is a little less.
	const maxHeaders = 64 << 10
	sizes := []int{0, 128, 129, 1 << 10, 3 << 10, 4 << 10, maxHeaders - 1024, maxHeaders, maxPayload - 1024}
	headers := []string{records.HeaderID, records.HeaderType, records.HeaderFrom, records.HeaderProcess,
		records.HeaderOwner, records.HeaderCause, records.HeaderReply, records.HeaderPriority,
		records.HeaderTime, records.HeaderContentType}
	limits := map[string]int{records.HeaderID: records.MaxIDLen, records.HeaderType: records.MaxTypeLen,
		records.HeaderProcess: records.MaxIDLen, records.HeaderOwner: records.MaxIDLen, records.HeaderCause: records.MaxIDLen}
	var cases []*sizeCase
	for _, h := range headers {
		for _, size := range sizes {
			c := &sizeCase{header: h, size: size, id: fmt.Sprintf("h%d", len(cases))}
			if limit, ok := limits[h]; ok && size > 0 {
				c.valid = new(size <= limit)
			}
			if h == records.HeaderType && size <= records.MaxTypeLen {
				c.valid = nil // a well-formed type the counter does not know: its logic rejects it
			}
			cases = append(cases, c)
		}
	}
	// A mailbox id can be as long as a client can publish: past the
	// server's control line (4 KiB) the publisher's own connection closes.
	for _, size := range []int{128, 129, 1 << 10, 3 << 10, 4000} {
		cases = append(cases, &sizeCase{size: size, id: strings.Repeat("i", size), valid: new(size <= 128)})
	}

	for _, c := range cases {
		if c.valid == nil || *c.valid {
			createEffector(t, conn.NATS(), "ea", "counter", c.id)
		}
	}
	var stored []*sizeCase
	for _, c := range cases {
		msg := nats.NewMsg("ea.mbox.counter." + c.id)
		msg.Data = []byte(`{"by":1}`)
		msg.Header.Set(records.HeaderType, "inc")
		msg.Header.Set(records.HeaderContentType, records.ContentJSON)
		msg.Header.Set(records.HeaderID, "rec-"+strconv.Itoa(len(c.id))+"-"+c.header+"-"+strconv.Itoa(c.size))
		if c.header != "" {
			msg.Header.Set(c.header, strings.Repeat("a", c.size))
		}
		ack, err := conn.JetStream().PublishMsg(ctx, msg)
		var api *jetstream.APIError
		switch {
		case c.size >= maxHeaders && c.header != "":
			// Not stored, and the publisher is told.
			if !errors.As(err, &api) || api.ErrorCode != jsErrHeaderSize {
				t.Errorf("publish %s of %d bytes: %v, want JetStream's error %d (headers too large)", c.name(), c.size, err, jsErrHeaderSize)
			}
			continue
		case err != nil:
			t.Fatalf("publish %s of %d bytes: %v", c.name(), c.size, err)
		}
		c.seq = ack.Sequence
		stored = append(stored, c)
	}
	// A record just under the maximum payload, in its body.
	createEffector(t, conn.NATS(), "ea", "counter", "big")
	big := nats.NewMsg("ea.mbox.counter.big")
	big.Data = []byte(`{"by":1,"pad":"` + strings.Repeat("a", maxPayload-1024) + `"}`)
	big.Header.Set(records.HeaderType, "inc")
	big.Header.Set(records.HeaderContentType, records.ContentJSON)
	bigAck, err := conn.JetStream().PublishMsg(ctx, big)
	if err != nil {
		t.Fatalf("publish a record of %d bytes: %v", len(big.Data), err)
	}
	stored = append(stored, &sizeCase{header: records.HeaderContentType, size: len(big.Data), id: "big", seq: bigAck.Sequence})
	createEffector(t, conn.NATS(), "ea", "counter", "after")
	after := nats.NewMsg("ea.mbox.counter.after")
	after.Data = []byte(`{"by":1}`)
	after.Header.Set(records.HeaderType, "inc")
	after.Header.Set(records.HeaderContentType, records.ContentJSON)
	afterAck, err := conn.JetStream().PublishMsg(ctx, after)
	if err != nil {
		t.Fatalf("publish the record after them: %v", err)
	}

	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := conn.JetStream().Stream(ctx, "EA_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	// Every counter but "after" gets one increment: a count of 1 means
	// applied (a dead-lettered record moves seq on, not the count).
	applied := func(id string, seq uint64) bool {
		d, err := proctest.ReadState(ctx, bucket, "counter."+id)
		return err == nil && d.Seq >= seq && d.Count() == 1
	}
	eventually(t, 90*time.Second, "the record sent after the oversize ones to be applied", func() bool {
		if !node.Running() {
			t.Fatalf("ea-node exited: %v", node.Err())
		}
		return applied("after", afterAck.Sequence)
	})
	var reasons map[uint64]string
	eventually(t, 60*time.Second, "every record applied or dead-lettered", func() bool {
		reasons = deadReasons(t, ctx, dead)
		for _, c := range stored {
			if _, ok := reasons[c.seq]; !ok && !applied(c.id, c.seq) {
				return false
			}
		}
		return true
	})
	for _, c := range stored {
		reason, isDead := reasons[c.seq]
		isApplied := applied(c.id, c.seq)
		switch {
		case isDead && isApplied:
			t.Errorf("%s of %d bytes: applied and dead-lettered (%s)", c.name(), c.size, reason)
		case isDead && reason == "":
			t.Errorf("%s of %d bytes: dead-lettered without a reason", c.name(), c.size)
		case c.valid != nil && *c.valid && !isApplied:
			t.Errorf("%s of %d bytes: dead-lettered (%s), want applied", c.name(), c.size, reason)
		case c.valid != nil && !*c.valid && !isDead:
			t.Errorf("%s of %d bytes: applied, want dead-lettered", c.name(), c.size)
		}
	}

	// The record store indexed every record, and still answers.
	indexer, err := conn.JetStream().Consumer(ctx, "EA_MBOX", store.IndexerName)
	if err != nil {
		t.Fatal(err)
	}
	var pending, ackPending uint64
	defer func() {
		if t.Failed() {
			t.Logf("indexer consumer: %d pending, %d waiting for an ack", pending, ackPending)
		}
	}()
	eventually(t, 30*time.Second, "the record store's indexer to index every record", func() bool {
		info, err := indexer.Info(ctx)
		if err != nil {
			t.Logf("indexer consumer info: %v", err)
			return false
		}
		pending, ackPending = info.NumPending, uint64(info.NumAckPending)
		return pending == 0 && ackPending == 0
	})
	remote, err := store.NewRemote(conn)
	if err != nil {
		t.Fatal(err)
	}
	page, err := remote.Query(ctx, store.Query{Type: "inc", Limit: 1})
	if err != nil || len(page.Records) == 0 {
		t.Errorf("record store query after the oversize records: %d records, %v", len(page.Records), err)
	}

	if code, body := proctest.Get("http://" + metrics + "/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q after the oversize records, want 200", code, body)
	}
	if out := node.Stderr.String(); strings.Contains(out, "connection closed") || strings.Contains(out, "control line") {
		t.Errorf("the node's connection was closed:\n%s", proctest.Tail(out, 20))
	}
}

func (c *sizeCase) name() string {
	if c.header == "" {
		return "mailbox id"
	}
	return c.header
}

// deadReasons reads every dead letter of stream and returns the EA-Error of
// each, by the sequence of the record it stands for.
func deadReasons(t testing.TB, ctx context.Context, stream jetstream.Stream) map[uint64]string {
	t.Helper()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("dead letters: %v", err)
	}
	out := map[uint64]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		if n, err := strconv.ParseUint(m.Header.Get(records.HeaderSeq), 10, 64); err == nil {
			out[n] = m.Header.Get(records.HeaderError)
		}
	}
	return out
}

// TestConnectionClosedForGoodExits: when NATS closes a node's connection
// for good (an error nats.go treats as final, injected here by a proxy
// between the node and the server), the node must not linger disconnected:
// it exits non-zero, saying why, so that its supervisor restarts it.
func TestConnectionClosedForGoodExits(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	srv := bustest.NewServer(t)
	proxy := proctest.StartNATSProxy(t, strings.TrimPrefix(srv.URL, "nats://"))
	metrics := proctest.FreeAddr(t)
	node := startNode(t, "node", metrics, "--nats", proxy.URL(), "--metrics", metrics, "--store", t.TempDir())
	node.waitReady(t, 30*time.Second)
	if _, body := proctest.Get("http://" + metrics + "/metrics"); !strings.Contains(body, `ea_nats_connection_state{state="connected"} 1`) {
		t.Errorf("/metrics does not show the connection connected:\n%s", grepLines(body, "ea_nats_connection_state"))
	}
	injected := time.Now()
	if n := proxy.Inject("-ERR 'injected fault'\r\n"); n == 0 {
		t.Fatal("the node has no connection through the proxy")
	}
	code := node.Wait(t, 30*time.Second)
	t.Logf("exited with %d %s after the fault", code, time.Since(injected).Round(time.Millisecond))
	if code == 0 {
		t.Errorf("exit status %d after NATS closed the connection for good, want non-zero", code)
	}
	if out := node.Stderr.String(); !strings.Contains(out, "nats closed the connection for good") || !strings.Contains(out, "injected fault") {
		t.Errorf("stderr does not say the connection was closed for good and why:\n%s", proctest.Tail(out, 20))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
