package web_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package puts the browser (CI
// installs it, see .ci/run).
const chromiumPath = "/usr/bin/chromium"

// Viewport of the console tests: the width the console is laid out for.
const viewW, viewH = 1400, 1000

// browser is one headless Chromium tab driven through chromedp.
type browser struct {
	t   testing.TB
	ctx context.Context
}

// startBrowser launches Chromium (a fresh profile in the test's temp dir)
// and opens one tab of 1,400×1,000; it skips the test when Chromium is not
// installed. The browser is stopped when the test ends.
func startBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("headless Chromium test skipped: %s not found (install the Debian package chromium; CI does)", chromiumPath)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(viewW, viewH))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to end
	})
	// The first Run starts the browser; its context must not time out.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewW, viewH)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// navigate opens url in the tab.
func (b *browser) navigate(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("navigate to %s: %v", url, err)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and returns its value decoded as T.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// must evaluates statements for their effect (in a block of their own),
// failing the test on an exception.
func (b *browser) must(expr string) {
	b.t.Helper()
	if _, err := eval[chromedp.Void](b, "{\n"+expr+"\n}"); err != nil {
		b.t.Fatalf("page: %s: %v", expr, err)
	}
}

// click clicks the element sel names (through the DOM: the element must be
// there, not necessarily visible).
func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitFor(sel, `!!document.querySelector(`+jsString(sel)+`)`)
	b.must(`document.querySelector(` + jsString(sel) + `).click()`)
}

// waitFor polls a boolean JavaScript expression until it is true, for 30 s.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 40*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err == nil {
		return
	}
	page, _ := eval[string](b, `document.body ? document.body.innerText.slice(0, 3000) : ""`)
	b.t.Fatalf("page: no %s within 30s (%v); page text:\n%s", what, err, page)
}

// screenshot saves a PNG of the whole page as name in the test's temp dir
// (and in $EA_SCREENSHOT_DIR when set), checks that it is a PNG of the
// viewport's width that is not blank, and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		b.t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	bounds := img.Bounds()
	if bounds.Dx() != viewW || bounds.Dy() < viewH/2 {
		b.t.Fatalf("screenshot %s is %dx%d, want %d wide and at least %d high", name, bounds.Dx(), bounds.Dy(), viewW, viewH/2)
	}
	// Not blank: many distinct colours (text, tables, the header).
	colours := map[uint32]bool{}
	for y := bounds.Min.Y; y < bounds.Max.Y && len(colours) < 64; y += 3 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colours) < 64 {
		b.t.Fatalf("screenshot %s looks blank: %d colours", name, len(colours))
	}
	dirs := []string{b.t.TempDir()}
	if d := os.Getenv("EA_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	var path string
	for _, d := range dirs {
		path = filepath.Join(d, name+".png")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var buf bytes.Buffer
	buf.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteRune(r)
		case '\n':
			buf.WriteString(`\n`)
		default:
			buf.WriteRune(r)
		}
	}
	buf.WriteByte('"')
	return buf.String()
}
