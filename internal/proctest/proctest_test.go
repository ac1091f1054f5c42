//go:build unix

package proctest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/effectors/effectors/internal/proctest"
	"go.uber.org/goleak"
)

// childEnv makes the test binary a child process: "serve=ADDR" prints a line,
// serves /readyz on ADDR until SIGTERM and exits 0; "fail" writes to stderr
// and exits 3.
const childEnv = "PROCTEST_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	goleak.VerifyTestMain(m)
}

func child(mode string) int {
	addr, ok := strings.CutPrefix(mode, "serve=")
	if !ok {
		fmt.Fprintln(os.Stderr, "child failing as asked")
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			fmt.Fprint(w, "ok")
			return
		}
		http.NotFound(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("child ready on", addr)
	<-ctx.Done()
	_ = srv.Close()
	fmt.Println("child stopped")
	return 0
}

func TestStartWaitSignal(t *testing.T) {
	addr := proctest.FreeAddr(t)
	p := proctest.Start(t, "child", os.Args[0], []string{"-test.run=^$"}, append(os.Environ(), childEnv+"=serve="+addr))
	p.WaitOutput(t, 30*time.Second, "child ready on "+addr)
	p.WaitHTTP(t, 30*time.Second, "http://"+addr+"/readyz")
	if code, body := proctest.Get("http://" + addr + "/readyz"); code != 200 || body != "ok" {
		t.Fatalf("GET /readyz = %d %q, want 200 \"ok\"", code, body)
	}
	if code, _ := proctest.Get("http://" + addr + "/nope"); code != 404 {
		t.Fatalf("GET /nope = %d, want 404", code)
	}
	if !p.Running() || p.Err() != nil {
		t.Fatalf("running %v, err %v: want running, no error", p.Running(), p.Err())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	if p.Running() || p.Err() != nil {
		t.Fatalf("running %v, err %v: want exited, no error", p.Running(), p.Err())
	}
	if out := p.Stdout.String(); !strings.HasSuffix(out, "child stopped\n") {
		t.Fatalf("stdout %q lacks the stop line", out)
	}
}

func TestExitStatusAndKill(t *testing.T) {
	p := proctest.Start(t, "failing", os.Args[0], []string{"-test.run=^$"}, append(os.Environ(), childEnv+"=fail"))
	if code := p.Wait(t, 30*time.Second); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
	if p.Err() == nil || p.Stderr.String() != "child failing as asked\n" {
		t.Fatalf("err %v, stderr %q", p.Err(), p.Stderr)
	}

	k := proctest.Start(t, "killed", os.Args[0], []string{"-test.run=^$"}, append(os.Environ(), childEnv+"=serve="+proctest.FreeAddr(t)))
	k.WaitOutput(t, 30*time.Second, "child ready")
	if err := k.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := k.Wait(t, 30*time.Second); code != -1 {
		t.Fatalf("exit status after SIGKILL %d, want -1", code)
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("PROCTEST_DROP_ME", "1")
	t.Setenv("PROCTEST_KEEP", "1")
	env := strings.Join(proctest.Environ("PROCTEST_DROP"), "\n")
	if strings.Contains(env, "PROCTEST_DROP_ME=") || !strings.Contains(env, "PROCTEST_KEEP=1") {
		t.Fatalf("Environ(PROCTEST_DROP) = %s", env)
	}
}

func TestBuildErrors(t *testing.T) {
	if err := proctest.Build("", "."); err == nil || !strings.Contains(err.Error(), "needs an output path") {
		t.Fatalf("Build with no output: %v", err)
	}
	if err := proctest.Build(t.TempDir()+"/x", "./no-such-package"); err == nil || !strings.Contains(err.Error(), "go build ./no-such-package") {
		t.Fatalf("Build of a missing package: %v", err)
	}
}

func TestTailAndBuffer(t *testing.T) {
	if got := proctest.Tail("a\nb\nc", 2); got != "[1 lines omitted]\nb\nc" {
		t.Fatalf("Tail = %q", got)
	}
	if got := proctest.Tail("a\nb", 2); got != "a\nb" {
		t.Fatalf("Tail = %q", got)
	}
	var b proctest.Buffer
	fmt.Fprint(&b, "x")
	fmt.Fprint(&b, "y")
	if b.String() != "xy" {
		t.Fatalf("Buffer = %q", b.String())
	}
}

// TestBuildPrebuilt: with PROCTEST_BINARIES set, Build links to a binary of
// the same package built the same way, and builds anew when the binary there
// is of another package or another race setting.
func TestBuildPrebuilt(t *testing.T) {
	race := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			race = race || s.Key == "-race" && s.Value == "true"
		}
	}
	dir, work := t.TempDir(), t.TempDir()
	// The prebuilt directory, as make test fills it: hello built this way.
	if err := proctest.Build(filepath.Join(dir, "hello"), "./testdata/hello"); err != nil {
		t.Fatal(err)
	}
	t.Setenv(proctest.EnvBinaries, dir)
	run := func(bin string) string {
		t.Helper()
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("run %s: %v", bin, err)
		}
		return strings.TrimSpace(string(out))
	}
	linked := func(bin string) bool {
		t.Helper()
		fi, err := os.Lstat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()&os.ModeSymlink != 0
	}

	same := filepath.Join(work, "same")
	if err := proctest.Build(same, "./testdata/hello"); err != nil {
		t.Fatal(err)
	}
	if !linked(same) || run(same) != "hello" {
		t.Fatalf("same package: linked %v, prints %q; want a link to the prebuilt hello", linked(same), run(same))
	}

	// "other" has no prebuilt binary: built.
	other := filepath.Join(work, "other")
	if err := proctest.Build(other, "./testdata/other"); err != nil {
		t.Fatal(err)
	}
	if linked(other) || run(other) != "other" {
		t.Fatalf("package without a prebuilt binary: linked %v, prints %q; want a fresh build", linked(other), run(other))
	}

	// A binary named hello that is another package: not used.
	if err := os.Rename(other, filepath.Join(dir, "hello")); err != nil {
		t.Fatal(err)
	}
	impostor := filepath.Join(work, "impostor")
	if err := proctest.Build(impostor, "./testdata/hello"); err != nil {
		t.Fatal(err)
	}
	if linked(impostor) || run(impostor) != "hello" {
		t.Fatalf("prebuilt hello of another package: linked %v, prints %q; want a fresh build", linked(impostor), run(impostor))
	}

	// hello with the other race setting: not used.
	args := []string{"build", "-o", filepath.Join(dir, "hello")}
	if !race {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "./testdata/hello")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mismatch := filepath.Join(work, "mismatch")
	if err := proctest.Build(mismatch, "./testdata/hello"); err != nil {
		t.Fatal(err)
	}
	if linked(mismatch) || run(mismatch) != "hello" {
		t.Fatalf("prebuilt hello with -race=%v: linked %v; want a fresh build", !race, linked(mismatch))
	}
}

// TestFreeAddrNeverTwice: FreeAddr does not hand out an address twice in one
// test binary, though the kernel may offer a closed port again at once (two
// ports for one process, --metrics and --gateway, once came out the same).
func TestFreeAddrNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 300 {
		addr := proctest.FreeAddr(t)
		if seen[addr] {
			t.Fatalf("FreeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
