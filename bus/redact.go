package bus

import (
	"net/url"
	"strings"
)

// redacted replaces the secret of a URL's user information.
const redacted = "REDACTED"

// RedactURL returns urls (one or more, comma-separated) with their secrets
// replaced: nats://user:pass@host becomes nats://user:REDACTED@host and a
// token URL nats://token@host becomes nats://REDACTED@host (a user without a
// password is a token to NATS). Text that does not parse as a URL but holds
// an "@" keeps only what follows the last "@". Every log line, banner and
// error that shows a NATS URL goes through it.
func RedactURL(urls string) string {
	if !strings.Contains(urls, "@") {
		return urls
	}
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	trimmed := strings.TrimSpace(s)
	u, err := url.Parse(trimmed)
	if err != nil || u.Host == "" || u.User == nil {
		if !strings.Contains(trimmed, "://") {
			// host:port without a scheme parses oddly; nats.go accepts it.
			if u2, err2 := url.Parse("nats://" + trimmed); err2 == nil && u2.User != nil && u2.Host != "" {
				return strings.TrimPrefix(redactUser(u2), "nats://")
			}
		}
		i := strings.LastIndexByte(trimmed, '@')
		if j := strings.Index(trimmed, "://"); j >= 0 && j < i {
			return trimmed[:j+3] + redacted + trimmed[i:]
		}
		return redacted + trimmed[i:]
	}
	return redactUser(u)
}

func redactUser(u *url.URL) string {
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redacted)
	} else {
		u.User = url.User(redacted)
	}
	return u.String()
}
