package web_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
	"github.com/effectors/effectors/web"
)

// TestLiveViewInChromium opens the live view in real headless Chromium,
// sends a record from its form and sees the state change and the record
// appear live, gives input to a waiting orchestration, and saves a
// screenshot (to the test's temp dir, and to $EA_SCREENSHOT_DIR when set).
func TestLiveViewInChromium(t *testing.T) {
	b := startBrowser(t)
	e := newEnv(t, envOpts{supervisor: true, cfg: web.Config{Token: "ui-token"}})
	ctx := context.Background()
	ref := records.Ref{Kind: "counter", ID: "ui1"}
	if _, err := e.actors.Create(ctx, ref, nil); err != nil {
		t.Fatal(err)
	}
	// A dead letter and a waiting orchestration for the page to show.
	bad, err := records.NewJSON("explode", map[string]int{"by": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.actors.Send(ctx, ref, bad); err != nil {
		t.Fatal(err)
	}
	oc, err := supervisor.NewClient(e.conn)
	if err != nil {
		t.Fatal(err)
	}
	orchID, err := oc.Start(ctx, "demo", map[string]string{"text": "hello live view"})
	if err != nil {
		t.Fatal(err)
	}

	b.navigate(e.http.URL + "/#token=ui-token")
	b.waitFor("connection", `document.querySelector("#conn").dataset.state === "open"`)
	b.waitFor("counter/ui1 in the effectors", `!!document.querySelector('tr[data-effector="counter/ui1"]')`)
	b.waitFor("the dead letter", `[...document.querySelectorAll("#dead tbody tr")].some(tr => tr.innerText.includes("rejected") && tr.innerText.includes("counter/ui1"))`)
	b.waitFor("the orchestration waiting", `document.querySelector('#orchs tr[data-id="`+orchID+`"]')?.dataset.status === "WAITING"`)

	// Open the effector's log, then send a record from the form.
	if err := b.eval(`document.querySelector('tr[data-effector="counter/ui1"]').click()`, nil); err != nil {
		t.Fatal(err)
	}
	b.waitFor("log history", `document.querySelector("#log-state").textContent === "live" && !!document.querySelector('#log tbody tr[data-type="explode"]')`)
	err = b.eval(`(() => {
		document.querySelector("#send-to").value = "counter/ui1";
		document.querySelector("#send-type").value = "inc";
		document.querySelector("#send-payload").value = '{"by": 5}';
		document.querySelector("#send-button").click();
	})()`, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the send acknowledged", `document.querySelector("#sends li")?.dataset.sync === "acked"`)
	b.waitFor("the state change", `document.querySelector('tr[data-effector="counter/ui1"] .state').textContent.includes('"count":5')`)
	b.waitFor("the record and its output in the log", `!!document.querySelector('#log tbody tr[data-type="inc"]') && !!document.querySelector('#log tbody tr[data-type="count"]')`)

	// The record the page acknowledged is stored, under the id it shows.
	var id string
	if err := b.eval(`document.querySelector("#sends li").dataset.id`, &id); err != nil {
		t.Fatal(err)
	}
	doc, err := e.actors.State(ctx, ref)
	if err != nil || doc.Status != "IDLE" {
		t.Fatalf("state %v %v", doc, err)
	}
	var s counterState
	if err := doc.Decode(&s); err != nil || s.Count != 5 {
		t.Fatalf("count %d %v, want 5", s.Count, err)
	}
	var ackText string
	if err := b.eval(`document.querySelector("#sends li").textContent`, &ackText); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains([]byte(ackText), []byte("seq "+strconv.FormatUint(doc.Seq, 10))) {
		t.Fatalf("ack shown %q, want the stream sequence %d", ackText, doc.Seq)
	}

	// The connection drops; a record sent meanwhile stays local_only, is
	// re-sent with its id on reconnect and acked; the log resumes from its
	// cursor: every record once.
	var sync string
	err = b.eval(`(() => {
		ws.close();
		document.querySelector("#send-payload").value = '{"by": 3}';
		document.querySelector("#send-button").click();
		return document.querySelector("#sends li").dataset.sync;
	})()`, &sync)
	if err != nil || sync != "local_only" {
		t.Fatalf("a record sent while disconnected is %q (%v), want local_only", sync, err)
	}
	b.waitFor("the re-send acknowledged after reconnecting", `document.querySelector("#conn").dataset.state === "open" && document.querySelector("#sends li").dataset.sync === "acked"`)
	b.waitFor("the state after the re-send", `document.querySelector('tr[data-effector="counter/ui1"] .state').textContent.includes('"count":8')`)
	b.waitFor("the log after the reconnect", `document.querySelectorAll('#log tbody tr[data-type="count"]').length === 2`)
	var dup bool
	if err := b.eval(`(() => { const ids = [...document.querySelectorAll("#log tbody tr")].map(tr => tr.dataset.id); return ids.length !== new Set(ids).size; })()`, &dup); err != nil || dup {
		t.Fatalf("the log shows a record twice after the reconnect (%v)", err)
	}

	// Give the orchestration its input from the form.
	b.waitFor("the waiting orchestration in the input form", `[...document.querySelectorAll("#orch-waiting option")].some(o => o.value === "`+orchID+`")`)
	if err := b.eval(`document.querySelector("#orch-waiting").value = "`+orchID+`"; document.querySelector("#orch-input-form button").click()`, nil); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the orchestration completed", `document.querySelector('#orchs tr[data-id="`+orchID+`"]')?.dataset.status === "COMPLETED"`)
	actortest.Eventually(t, 10*time.Second, "orchestration completed", func() bool {
		o, err := oc.Status(ctx, orchID)
		return err == nil && o.Status == supervisor.StatusCompleted
	})

	// The orchestration's process, opened from its row: its task and
	// result records, with their envelopes.
	if err := b.eval(`document.querySelector('#orchs tr[data-id="`+orchID+`"] td').click()`, nil); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the orchestration's process log", `document.querySelector("#log-title").textContent.includes("process `+orchID+`") && document.querySelectorAll("#log tbody tr").length >= 4 && document.querySelector("#log-state").textContent === "live"`)

	png := b.screenshot()
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 10_000 {
		t.Fatalf("screenshot of %d bytes is not a PNG of the page", len(png))
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("EA_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, "screenshot.png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}
