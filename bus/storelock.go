package bus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LockFile is the name of the lock file in an embedded server's store
// directory. It holds an exclusive lock (flock) while the server runs, and
// the pid and client address of the process that holds it.
const LockFile = "LOCK"

var errLockHeld = errors.New("lock held")

// storeLock is the exclusive lock of a store directory.
type storeLock struct{ f *os.File }

// lockStore locks dir for one embedded server. It fails with an error
// matching [ErrStoreLocked] that names the directory and what holds it when
// another server (in this process or another) has it.
func lockStore(dir, listen string) (*storeLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open store lock %s: %w (set --store to a writable directory)", path, err)
	}
	if err := tryLock(f); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, errLockHeld) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%w: %s is in use by %s: stop that server, or give this one its own directory with --store", ErrStoreLocked, dir, who)
		}
		return nil, fmt.Errorf("lock store %s: %w", path, err)
	}
	l := &storeLock{f: f}
	l.note(listen)
	return l, nil
}

// note writes who holds the lock into the lock file, for the error another
// server gets.
func (l *storeLock) note(listen string) {
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt([]byte(fmt.Sprintf("pid %d (embedded nats-server listening on %s)\n", os.Getpid(), listen)), 0)
	}
}

// release unlocks the store; closing the file releases the lock.
func (l *storeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close()
	l.f = nil
}
