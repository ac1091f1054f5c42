package web_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/web"
)

// TestConsoleInChromium opens the console in real headless Chromium
// (chromedp) at 1,400×1,000 and uses every view as a person would: the
// token form at once, a wrong token refused once, #token= taken without a
// reload; effectors paged, created and terminated; a record sent and
// acknowledged (and again across a dropped connection), the log filtered,
// one-line rows, the record drawer; dead letters paged and filtered by the
// gateway, one replayed and discarded;
// an orchestration's page (timeline, tasks and the worker records they
// caused, input given, result); the node view. Screenshots of each view
// are checked (a PNG, 1,400 wide, not blank) and saved to the test's temp
// dir (and $EA_SCREENSHOT_DIR when set).
func TestConsoleInChromium(t *testing.T) {
	b := startBrowser(t)
	e := newEnv(t, envOpts{supervisor: true, cfg: web.Config{Token: "ui-token", AuthTimeout: 25 * time.Second}})
	ctx := context.Background()
	ref := records.Ref{Kind: "counter", ID: "ui1"}
	if _, err := e.actors.Create(ctx, ref, nil); err != nil {
		t.Fatal(err)
	}
	// 60 more counters: two pages of 50.
	for i := range 60 {
		if _, err := e.actors.Create(ctx, records.Ref{Kind: "counter", ID: fmt.Sprintf("c%02d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A dead letter (explode is always rejected) with a long id.
	bad, err := records.NewJSON("explode", map[string]int{"by": 1})
	if err != nil {
		t.Fatal(err)
	}
	bad.ID = "explode-" + strings.Repeat("0123456789", 6)
	if _, err := e.actors.Send(ctx, ref, bad); err != nil {
		t.Fatal(err)
	}
	// 55 more dead letters, of counter/c00: two pages of 50 (newest first,
	// so the one of counter/ui1, the oldest, is on the second).
	for i := range 55 {
		r, err := records.NewJSON("explode", map[string]int{"by": i})
		if err != nil {
			t.Fatal(err)
		}
		r.ID = fmt.Sprintf("many-%02d", i)
		if _, err := e.actors.Send(ctx, records.Ref{Kind: "counter", ID: "c00"}, r); err != nil {
			t.Fatal(err)
		}
	}
	actortest.Eventually(t, 60*time.Second, "56 dead letters", func() bool {
		st, err := e.conn.JetStream().Stream(ctx, e.conn.Names().DeadStream())
		return err == nil && st.CachedInfo().State.Msgs == 56
	})
	oc, err := supervisor.NewClient(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	orchID, err := oc.Start(ctx, "demo", map[string]string{"text": "hello console"})
	if err != nil {
		t.Fatal(err)
	}

	// No token known: the form at once, while the connection still waits
	// for the gateway (which would refuse it only after 25 s).
	b.navigate(e.http.URL + "/")
	b.must(`window.__loaded = "first"`)
	b.waitFor("the token form before any refusal", `!document.querySelector("#token-form").hidden && window.effectors.status === "connecting"`)
	// A wrong token from the form: refused once, said once.
	b.must(`document.querySelector("#token").value = "wrong"; document.querySelector("#token-form button").click()`)
	b.waitFor("the wrong token refused", `document.querySelector("#conn").dataset.state === "token" && !document.querySelector("#token-form").hidden`)
	why, err := eval[string](b, `document.querySelector("#token-why").textContent + " | " + document.querySelector("#conn").textContent`)
	if err != nil || !strings.Contains(why, "wrong token") || strings.Count(why, "unauthorized") > 0 {
		t.Fatalf("refusal shown as %q (%v): want the reason once, without unauthorized: unauthorized", why, err)
	}
	// #token= in the address, without a reload: connected, the token gone
	// from the address bar.
	b.must(`location.hash = "#token=ui-token"`)
	b.waitFor("the connection", `document.querySelector("#conn").dataset.state === "open" && document.querySelector("#token-form").hidden`)
	if got, err := eval[string](b, `window.__loaded + " " + location.href`); err != nil || !strings.HasPrefix(got, "first ") || strings.Contains(got, "ui-token") {
		t.Fatalf("after #token=: %q (%v): want the same page, the token out of the address", got, err)
	}

	// Effectors: counter's first page of 50, the next of 11, back.
	b.waitFor("counter's first page", `document.querySelector("#eff-kind").value === "counter" && document.querySelectorAll("#effectors tbody tr[data-effector]").length === 50`)
	b.click("#eff-pager .next")
	b.waitFor("counter's second page", `document.querySelectorAll("#effectors tbody tr[data-effector]").length === 11 && document.querySelector("#eff-pager .range").textContent.includes("51–61")`)
	b.click("#eff-pager .prev")
	b.waitFor("counter's first page again", `document.querySelectorAll("#effectors tbody tr[data-effector]").length === 50 && document.querySelector("#eff-pager .prev").disabled`)
	// Create from the form; terminate from a row (two clicks).
	b.must(`document.querySelector("#create-ref").value = "counter/made-in-ui"; document.querySelector("#create-button").click()`)
	actortest.Eventually(t, 30*time.Second, "counter/made-in-ui created", func() bool {
		_, err := e.actors.State(ctx, records.Ref{Kind: "counter", ID: "made-in-ui"})
		return err == nil
	})
	b.waitFor("the created effector listed", `!!document.querySelector('#effectors tr[data-effector="counter/made-in-ui"]')`)
	b.click(`#effectors tr[data-effector="counter/made-in-ui"] button.terminate`)
	b.click(`#effectors tr[data-effector="counter/made-in-ui"] button.terminate`)
	b.waitFor("the effector terminated", `document.querySelector('#effectors tr[data-effector="counter/made-in-ui"]')?.dataset.status === "TERMINATED"`)
	if doc, err := e.actors.State(ctx, records.Ref{Kind: "counter", ID: "made-in-ui"}); err != nil || doc.Status != actor.StatusTerminated {
		t.Fatalf("counter/made-in-ui after terminate: %v %v", doc.Status, err)
	}
	// The status filter asks the gateway: only the terminated one.
	b.must(`const s = document.querySelector("#eff-status"); s.value = "TERMINATED"; s.dispatchEvent(new Event("change"))`)
	b.waitFor("the status filter", `[...document.querySelectorAll("#effectors tbody tr[data-effector]")].map(tr => tr.dataset.effector).join() === "counter/made-in-ui"`)
	b.must(`const s = document.querySelector("#eff-status"); s.value = ""; s.dispatchEvent(new Event("change"))`)
	b.screenshot("effectors")

	// Records: the log of counter/ui1; a send with a long payload.
	b.click(`#tabs button[data-view="records"]`)
	b.must(`document.querySelector("#log-target").value = "counter/ui1"; document.querySelector("#log-form button").click()`)
	b.waitFor("log history", `document.querySelector("#log-state").textContent === "live" && !!document.querySelector('#log tbody tr[data-type="explode"]')`)
	long := `{"by": 5, "note": "` + strings.Repeat("a long payload that must stay on one line ", 8) + `"}`
	b.must(`document.querySelector("#send-to").value = "counter/ui1";
		document.querySelector("#send-type").value = "inc";
		document.querySelector("#send-payload").value = ` + jsString(long) + `;
		document.querySelector("#send-button").click()`)
	b.waitFor("the send acknowledged", `document.querySelector("#sends li")?.dataset.sync === "acked"`)
	b.waitFor("the record and its output in the log", `!!document.querySelector('#log tbody tr[data-type="inc"]') && !!document.querySelector('#log tbody tr[data-type="count"]')`)
	doc, err := e.actors.State(ctx, ref)
	if err != nil || doc.Status != actor.StatusIdle {
		t.Fatalf("state %v %v", doc, err)
	}
	var s counterState
	if err := doc.Decode(&s); err != nil || s.Count != 5 {
		t.Fatalf("count %d %v, want 5", s.Count, err)
	}
	ackText, err := eval[string](b, `document.querySelector("#sends li").textContent`)
	if err != nil || !strings.Contains(ackText, "seq "+strconv.FormatUint(doc.Seq, 10)) {
		t.Fatalf("ack shown %q (%v), want the stream sequence %d", ackText, err, doc.Seq)
	}
	// Readable at 1,400 px: every row one line; the long payload and ids
	// cut with an ellipsis, whole in the tooltip.
	rows, err := eval[[]float64](b, `[...document.querySelectorAll("#log tbody tr")].map(tr => tr.getBoundingClientRect().height)`)
	if err != nil || len(rows) < 3 {
		t.Fatalf("log rows %v %v", rows, err)
	}
	for _, h := range rows {
		if h > 30 {
			t.Fatalf("a log row is %.0f px high (rows %v): want one line", h, rows)
		}
	}
	cut, err := eval[bool](b, `(() => { const c = document.querySelector('#log tbody tr[data-type="inc"] td.json'); return c.scrollWidth > c.clientWidth && c.title.includes("must stay on one line"); })()`)
	if err != nil || !cut {
		t.Fatalf("the long payload is not cut to one line with its tooltip (%v)", err)
	}
	b.screenshot("records")
	// The drawer: the envelope and the payload pretty-printed.
	b.click(`#log tbody tr[data-type="inc"]`)
	b.waitFor("the record drawer", `!document.querySelector("#drawer").hidden && document.querySelector('#drawer-envelope td[data-field="effector"]')?.textContent === "counter/ui1"`)
	payload, err := eval[string](b, `document.querySelector("#drawer-payload").textContent`)
	if err != nil || !strings.Contains(payload, "\n  \"by\": 5,\n") {
		t.Fatalf("drawer payload %q (%v): want it pretty-printed", payload, err)
	}
	b.screenshot("record-drawer")
	// From the output (count), its cause link opens the record that caused
	// it (a get from the record store, which may need a moment to index it).
	incID, err := eval[string](b, `document.querySelector("#sends li").dataset.id`)
	if err != nil {
		t.Fatal(err)
	}
	b.click(`#log tbody tr[data-type="count"]`)
	b.waitFor("the output's drawer", `document.querySelector('#drawer-envelope td[data-field="cause"]')?.textContent === "`+incID+`"`)
	b.waitFor("the cause followed", `(() => {
		if (document.querySelector("#drawer-title").textContent === "record `+incID+`") { return true; }
		document.querySelector('#drawer-envelope td[data-field="cause"] a')?.click();
		return false;
	})()`)
	b.must(`document.querySelector("#drawer-close").click()`)
	// The type filter.
	b.must(`const i = document.querySelector("#log-type"); i.value = "count"; i.dispatchEvent(new Event("input"))`)
	b.waitFor("the type filter", `(() => { const rs = [...document.querySelectorAll("#log tbody tr[data-type]")]; return rs.length === 1 && rs[0].dataset.type === "count"; })()`)
	b.must(`const i = document.querySelector("#log-type"); i.value = ""; i.dispatchEvent(new Event("input"))`)

	// The connection drops; a record sent meanwhile stays local_only, is
	// re-sent with its id on reconnect and acked; the log resumes: every
	// record once.
	sync, err := eval[string](b, `(() => {
		ws.close();
		document.querySelector("#send-payload").value = '{"by": 3}';
		document.querySelector("#send-button").click();
		return document.querySelector("#sends li").dataset.sync;
	})()`)
	if err != nil || sync != "local_only" {
		t.Fatalf("a record sent while disconnected is %q (%v), want local_only", sync, err)
	}
	b.waitFor("the re-send acknowledged after reconnecting", `document.querySelector("#conn").dataset.state === "open" && document.querySelector("#sends li").dataset.sync === "acked"`)
	b.waitFor("the log after the reconnect", `document.querySelectorAll('#log tbody tr[data-type="count"]').length === 2`)
	if dup, err := eval[bool](b, `(() => { const ids = [...document.querySelectorAll("#log tbody tr")].map(tr => tr.dataset.id); return ids.length !== new Set(ids).size; })()`); err != nil || dup {
		t.Fatalf("the log shows a record twice after the reconnect (%v)", err)
	}

	// Dead letters: replay (a new record, dead-lettered again since explode
	// always fails), then discard the original.
	// Paged by the gateway: 50, then 6, newest first, no dead letter twice.
	b.click(`#tabs button[data-view="dead"]`)
	seqsJS := `[...document.querySelectorAll("#dead tbody tr[data-seq]")].map(tr => Number(tr.dataset.seq))`
	b.waitFor("the first page of dead letters", `document.querySelectorAll("#dead tbody tr[data-seq]").length === 50 && document.querySelector("#dead-pager .range").textContent.includes("more")`)
	page1, err := eval[[]float64](b, seqsJS)
	if err != nil {
		t.Fatal(err)
	}
	b.click("#dead-pager .next")
	b.waitFor("the second page of dead letters", `document.querySelectorAll("#dead tbody tr[data-seq]").length === 6 && document.querySelector("#dead-pager .range").textContent.includes("51–56") && document.querySelector("#dead-pager .next").disabled`)
	page2, err := eval[[]float64](b, seqsJS)
	if err != nil {
		t.Fatal(err)
	}
	all := append(page1, page2...)
	for i := 1; i < len(all); i++ {
		if all[i] >= all[i-1] {
			t.Fatalf("dead letters over two pages %v: want 56, newest first, each once", all)
		}
	}
	b.screenshot("dead-letters-page-2")
	b.click("#dead-pager .prev")
	b.waitFor("the first page again", `document.querySelectorAll("#dead tbody tr[data-seq]").length === 50 && document.querySelector("#dead-pager .prev").disabled`)
	// The effector filter asks the gateway: counter/ui1's, the oldest of
	// all, comes first.
	b.must(`const i = document.querySelector("#dead-effector"); i.value = "counter/ui1"; i.dispatchEvent(new Event("input"))`)
	row := `#dead tbody tr[data-id="` + bad.ID + `"]`
	b.waitFor("the effector filter", `document.querySelectorAll("#dead tbody tr[data-seq]").length === 1 && !!document.querySelector(`+jsString(row)+`)`)
	b.waitFor("the dead letter", `document.querySelector(`+jsString(row)+`)?.innerText.includes("rejected")`)
	seq, err := eval[string](b, `document.querySelector(`+jsString(row)+`).dataset.seq`)
	if err != nil {
		t.Fatal(err)
	}
	b.click(row + ` button.replay`)
	b.waitFor("the replay", `!!document.querySelector(`+jsString(row)+`)?.dataset.replayed`)
	replayed, err := eval[string](b, `document.querySelector(`+jsString(row)+`).dataset.replayed`)
	if err != nil || replayed == "" || replayed == bad.ID {
		t.Fatalf("replayed as %q (%v)", replayed, err)
	}
	b.waitFor("the replay's own dead letter", `!!document.querySelector('#dead tbody tr[data-id="`+replayed+`"]')`)
	b.screenshot("dead-letters")
	b.click(row + ` button.discard`)
	b.click(row + ` button.discard`)
	b.waitFor("the dead letter discarded", `!document.querySelector(`+jsString(row)+`)`)
	n, _ := strconv.ParseUint(seq, 10, 64)
	if _, err := e.conn.StoredAt(ctx, e.conn.Names().DeadStream(), n, ""); !errors.Is(err, bus.ErrNoMessage) {
		t.Fatalf("discarded dead letter #%d still stored: %v", n, err)
	}

	// The orchestration's page: waiting for input after task A.
	b.click(`#tabs button[data-view="orchestrations"]`)
	b.waitFor("the orchestration waiting", `document.querySelector('#orchs tr[data-id="`+orchID+`"]')?.dataset.status === "WAITING"`)
	b.click(`#orchs tr[data-id="` + orchID + `"] td`)
	b.waitFor("the orchestration page", `document.querySelector("#view-orch").classList.contains("active") && document.querySelector("#view-orch").dataset.status === "WAITING" && !document.querySelector("#orch-input-button").disabled`)
	b.waitFor("the input it was started with", `document.querySelector("#orch-start-input").textContent.includes("hello console")`)
	b.waitFor("the timeline so far", `[...document.querySelectorAll("#orch-timeline tbody tr")].some(tr => tr.dataset.event === "start")`)
	b.waitFor("task A and the record it caused", `[...document.querySelectorAll("#orch-tasks tbody tr[data-id] td.caused")].some(td => !td.textContent.includes("none yet"))`)
	b.must(`document.querySelector("#orch-answer").value = '{"note": "from the console test"}'; document.querySelector("#orch-input-button").click()`)
	b.waitFor("the orchestration completed", `document.querySelector("#view-orch").dataset.status === "COMPLETED" && document.querySelector("#orch-result").textContent.includes("from the console test")`)
	b.waitFor("the whole timeline", `(() => { const ev = [...document.querySelectorAll("#orch-timeline tbody tr")].map(tr => tr.dataset.event + ":" + tr.dataset.status); return ev.includes("input:RUNNING") && ev.at(-1) === "result:COMPLETED"; })()`)
	b.waitFor("both tasks with their worker records", `document.querySelectorAll("#orch-tasks tbody tr[data-id]").length >= 2 && document.querySelectorAll("#orch-workers tbody tr[data-id]").length >= 2`)
	actortest.Eventually(t, 30*time.Second, "orchestration completed", func() bool {
		o, err := oc.Status(ctx, orchID)
		return err == nil && o.Status == supervisor.StatusCompleted
	})
	b.screenshot("orchestration")

	// Nodes: the one node holding every partition of its three kinds,
	// throughput after two samples, the index lag.
	parts := e.conn.Names().Partitions()
	b.click(`#tabs button[data-view="nodes"]`)
	b.waitFor("the node view", `(() => { const tr = document.querySelector("#nodes tbody tr[data-node]"); return !!tr && tr.querySelector(".parts").textContent === "`+strconv.Itoa(3*parts)+`" && tr.querySelector(".rate").textContent !== "…" && Number(tr.querySelector(".done").textContent) > 0; })()`)
	b.waitFor("the index lag", `document.querySelector("#nodes-summary").dataset.indexLag !== undefined && document.querySelector("#nodes-summary").dataset.indexLag !== ""`)
	b.screenshot("nodes")
}

// TestConsoleAsUser: a user's console shows only its own effectors and
// dead letters, hides
// the Nodes tab, and refuses the node view (by its address) with a clear
// message; an admin's token given by #token= in the same page starts the
// console again as the admin, without a reload.
func TestConsoleAsUser(t *testing.T) {
	b := startBrowser(t)
	path := t.TempDir() + "/users"
	if err := os.WriteFile(path, usersFile(userLine("alice", "user", tokAlice), userLine("ops", "admin", tokOps)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{cfg: web.Config{UsersFile: path}})
	ctx := context.Background()
	if _, err := e.actors.CreateOwned(ctx, records.Ref{Kind: "counter", ID: "alices"}, nil, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.actors.Create(ctx, records.Ref{Kind: "counter", ID: "not-hers"}, nil); err != nil {
		t.Fatal(err)
	}
	// A dead letter of each (explode is always rejected).
	for _, r := range []struct {
		id, owner string
		ref       records.Ref
	}{{"hers-dead", "alice", records.Ref{Kind: "counter", ID: "alices"}}, {"not-hers-dead", "", records.Ref{Kind: "counter", ID: "not-hers"}}} {
		rec, err := records.NewJSON("explode", map[string]int{"by": 1})
		if err != nil {
			t.Fatal(err)
		}
		rec.ID, rec.Owner = r.id, r.owner
		if _, err := e.actors.Send(ctx, r.ref, rec); err != nil {
			t.Fatal(err)
		}
	}
	actortest.Eventually(t, 30*time.Second, "two dead letters", func() bool {
		st, err := e.conn.JetStream().Stream(ctx, e.conn.Names().DeadStream())
		return err == nil && st.CachedInfo().State.Msgs == 2
	})
	b.navigate(e.http.URL + "/#/nodes&token=" + tokAlice)
	b.waitFor("the connection as alice", `document.querySelector("#conn").dataset.state === "open" && document.querySelector("#user").textContent === "alice (user)"`)
	b.waitFor("the node view refused", `document.querySelector("#nodes-error").textContent.startsWith("forbidden: nodes: the node view is for admins")`)
	if visible, err := eval[bool](b, `document.querySelector('#tabs button[data-view="nodes"]').offsetParent !== null`); err != nil || visible {
		t.Fatalf("the Nodes tab is shown to a user (%v)", err)
	}
	b.click(`#tabs button[data-view="effectors"]`)
	b.waitFor("her effector only", `[...document.querySelectorAll("#effectors tbody tr[data-effector]")].map(tr => tr.dataset.effector).join() === "counter/alices"`)
	// Her dead letters only, from the gateway's dead.list.
	b.click(`#tabs button[data-view="dead"]`)
	b.waitFor("her dead letter only", `[...document.querySelectorAll("#dead tbody tr[data-seq]")].map(tr => tr.dataset.id).join() === "hers-dead"`)

	// Another token by #token=, in the same page: the console starts again
	// as that identity (an admin: both effectors, the Nodes tab).
	b.must(`window.__loaded = "same"; location.hash = "#token=` + tokOps + `"`)
	b.waitFor("the console as ops", `document.querySelector("#user").textContent === "ops (admin)" && document.querySelector('#tabs button[data-view="nodes"]').offsetParent !== null`)
	b.waitFor("every effector", `[...document.querySelectorAll("#effectors tbody tr[data-effector]")].map(tr => tr.dataset.effector).sort().join() === "counter/alices,counter/not-hers"`)
	b.click(`#tabs button[data-view="dead"]`)
	b.waitFor("every dead letter", `[...document.querySelectorAll("#dead tbody tr[data-seq]")].map(tr => tr.dataset.id).sort().join() === "hers-dead,not-hers-dead"`)
	if got, err := eval[string](b, `window.__loaded`); err != nil || got != "same" {
		t.Fatalf("the page was reloaded (%q, %v)", got, err)
	}
}
