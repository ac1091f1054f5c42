package bustest

import "syscall"

// childAttrs has a server process killed when the test process dies, so
// that a test binary killed on a timeout leaves no server behind.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
