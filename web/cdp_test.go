package web_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// chromiumPath is where Debian's chromium package puts the browser (CI
// installs it, see .ci/run).
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium driven over the DevTools protocol: a
// minimal client (commands by id, one page session), enough for tests.
type browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	ws      *websocket.Conn
	session string

	mu      sync.Mutex // guards nextID and waiting
	nextID  int
	waiting map[int]chan cdpReply
	done    chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser launches Chromium and opens one page; it skips the test
// when Chromium is not installed.
func startBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("headless Chromium test skipped: %s not found (install the Debian package chromium; CI does)", chromiumPath)
	}
	cmd := exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-port=0", "--window-size=1400,1000", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	urlc := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "DevTools listening on "); ok {
				urlc <- strings.TrimSpace(u)
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	var wsURL string
	select {
	case wsURL = <-urlc:
	case <-exited:
		t.Fatal("chromium exited before listening for DevTools")
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not announce its DevTools address within 30s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatalf("connect to DevTools: %v", err)
	}
	ws.SetReadLimit(64 << 20)
	b := &browser{t: t, cmd: cmd, ws: ws, waiting: map[int]chan cdpReply{}, done: make(chan struct{})}
	go b.read()
	t.Cleanup(func() {
		_ = ws.CloseNow()
		<-b.done
	})
	var target struct{ TargetID string }
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.call(b.session, "Page.enable", nil, nil)
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

func (b *browser) read() {
	defer close(b.done)
	for {
		_, data, err := b.ws.Read(context.Background())
		if err != nil {
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(data, &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call runs a DevTools command (on the page session when session is set)
// and decodes its result into out.
func (b *browser) call(session, method string, params, out any) {
	b.t.Helper()
	if err := b.try(session, method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) try(session, method string, params, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.ws.Write(ctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: DevTools connection closed", method)
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer within 30s", method)
	}
}

// navigate opens url in the page.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
}

// eval evaluates a JavaScript expression in the page and decodes its
// value into out (when not nil).
func (b *browser) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.try(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return errors.New(r.ExceptionDetails.Text + " " + r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// waitFor polls a boolean JavaScript expression until it is true.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		var ok bool
		lastErr = b.eval(expr, &ok)
		if lastErr == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	var page string
	_ = b.eval(`document.body ? document.body.innerText.slice(0, 3000) : ""`, &page)
	b.t.Fatalf("page: no %s within 20s (last error %v); page text:\n%s", what, lastErr, page)
}

// screenshot returns a PNG of the page.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var r struct{ Data string }
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}
