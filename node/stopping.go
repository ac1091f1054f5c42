package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/effectors/effectors/bus"
)

// StoppingFile is the name of the file a node with an embedded server
// writes in its store directory while it stops: "pid <pid>". Stopping takes
// seconds (the server writes the state of every stream and consumer to disk
// before it releases the store and its ports: 3 s with 256 partition
// consumers, more with more), and a node started on the same store
// meanwhile waits for it instead of failing with "address already in use"
// or "store in use". The file is removed once the stopping node released
// the store, its NATS port and its metrics port.
const StoppingFile = "STOPPING"

// maxHandover bounds how long a starting node waits for the one stopping
// on its store.
const maxHandover = time.Minute

// markerWait is how long a starting node looks for the marker of a node
// whose lock it finds, in case that one got its signal a moment ago.
const markerWait = 500 * time.Millisecond

// stopMarker writes and removes this process's StoppingFile in dir.
type stopMarker struct {
	dir string
	log *slog.Logger

	once   sync.Once
	mu     sync.Mutex // guards marked
	marked bool       // the file was written by mark
}

// mark writes the file, once: later and concurrent calls return when the
// first has. A marker that cannot be written is logged and costs only the
// wait of a node started before this one exits.
func (m *stopMarker) mark() {
	m.once.Do(func() {
		path := filepath.Join(m.dir, StoppingFile)
		if err := os.WriteFile(path, []byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0o644); err != nil {
			m.log.Warn("cannot mark the store as stopping: a node started on it before this one exits fails instead of waiting", "path", path, "err", err)
			return
		}
		m.mu.Lock()
		m.marked = true
		m.mu.Unlock()
	})
}

// unmark removes the file if mark wrote it.
func (m *stopMarker) unmark() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.marked {
		return
	}
	m.marked = false
	path := filepath.Join(m.dir, StoppingFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("remove the store's stopping marker", "path", path, "err", err)
	}
}

// awaitStopping waits while the node that holds store directory dir is
// stopping: its StoppingFile names a running process that the store's lock
// file (bus.LockFile) names too. It returns at once when no node is
// stopping there (nothing to wait for: a node that runs on the store is
// refused by the lock as before, at once), when that one is gone, after
// maxHandover, or when ctx ends.
func awaitStopping(ctx context.Context, dir string, log *slog.Logger) {
	pid := stoppingPID(dir)
	if pid == 0 {
		// A restart a moment after the signal may come before the node
		// that got it wrote its marker: a store whose lock names a running
		// process is looked at again for a moment (a node that is not
		// stopping is then refused by the lock, as before).
		holder := lockHolder(dir)
		if holder == 0 || holder == os.Getpid() || !alive(holder) {
			return
		}
		for deadline := time.Now().Add(markerWait); pid == 0 && time.Now().Before(deadline); pid = stoppingPID(dir) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}
	if pid == 0 || pid == os.Getpid() || !holdsLock(dir, pid) || !alive(pid) {
		return
	}
	start := time.Now()
	log.Info("the previous node on this store is stopping: waiting until it has released the store and its ports", "store", dir, "pid", pid, "at_most", maxHandover)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for stoppingPID(dir) == pid && alive(pid) {
		if time.Since(start) > maxHandover {
			log.Warn("the previous node on this store is still stopping: starting anyway", "store", dir, "pid", pid, "waited", time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	log.Info("the previous node on this store has stopped", "pid", pid, "waited", time.Since(start).Round(time.Millisecond))
}

// stoppingPID is the process named by dir's StoppingFile, or 0.
func stoppingPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, StoppingFile))
	if err != nil {
		return 0
	}
	return pidOf(string(b))
}

// holdsLock reports whether dir's lock file names pid as its holder (bus
// writes "pid <pid> (…)" there while a server holds the store, and empties
// it when the server releases it): a stale StoppingFile whose process id
// was reused by another program does not hold a start back.
func holdsLock(dir string, pid int) bool {
	return lockHolder(dir) == pid
}

// lockHolder is the process dir's lock file names, or 0.
func lockHolder(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, bus.LockFile))
	if err != nil {
		return 0
	}
	return pidOf(string(b))
}

// pidOf reads "pid <n>" at the start of s.
func pidOf(s string) int {
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != "pid" {
		return 0
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
