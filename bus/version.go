package bus

import (
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server the runtime runs on. Checked
// against real servers: 2.9 cannot transform the mailbox stream's subjects,
// 2.10 to 2.12 provision but nodes never become ready (unpinning and
// resetting partition consumers fail), 2.14 and 2.15 work.
const MinServerVersion = "2.14.0"

// checkServerVersion returns an error wrapping [ErrServerVersion] when
// version (as the server reports it, e.g. "2.15.2" or "2.14.0-beta.1") is
// older than [MinServerVersion]; nil when it is not, or cannot be read.
func checkServerVersion(version string) error {
	have, ok := parseVersion(version)
	if !ok {
		return nil // not a version we can read: let the server's own errors speak
	}
	want, _ := parseVersion(MinServerVersion)
	for i := range have {
		if have[i] != want[i] {
			if have[i] < want[i] {
				return fmt.Errorf("%w: the server is %s, the runtime needs %s or later (partition consumers use subject transforms, priority groups and consumer resets); upgrade it, or leave --nats empty to run the embedded one", ErrServerVersion, version, MinServerVersion)
			}
			return nil
		}
	}
	return nil
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
