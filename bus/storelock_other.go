//go:build !unix

package bus

import "os"

// tryLock does not lock on this platform: only the unix builds guard the
// store directory.
func tryLock(*os.File) error { return nil }
