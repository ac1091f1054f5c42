package bus_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/effectors/effectors/bus"
)

// Two embedded servers on one store directory would corrupt it: the second
// start fails with ErrStoreLocked naming the directory and the holder, and the
// lock is released by Shutdown so a restart works.
func TestStoreDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("first server: %v", err)
	}
	second, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: dir})
	if err == nil {
		second.Shutdown()
		first.Shutdown()
		t.Fatal("a second server opened the same store directory")
	}
	if !errors.Is(err, bus.ErrStoreLocked) {
		t.Errorf("second server: %v, want ErrStoreLocked", err)
	}
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{abs, "pid " + strconv.Itoa(os.Getpid()), first.Addr(), "--store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	first.Shutdown()
	first.Shutdown() // twice is harmless

	again, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("restart after Shutdown: %v", err)
	}
	again.Shutdown()
}
