package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// The environment variables that carry secrets. They have no flag on
// purpose: a secret on the command line is visible to every user of the
// machine (ps, /proc) and stays in shell histories.
const (
	PasswordEnv = "EA_PASSWORD" // the password of --user
	TokenEnv    = "EA_TOKEN"    // a NATS authentication token
)

// Auth is how a binary authenticates to NATS and secures its connection:
// the settings every binary shares ([AuthSettings]). At most one way to
// authenticate is given: a .creds file (JWT and NKEY seed, for NATS
// operators and accounts), an NKEY seed file, a user with its password, or a
// token; TLS settings go with any of them. Secrets never come from the
// command line: a password from EA_PASSWORD or --password-file, a token from
// EA_TOKEN or --token-file. After [Parse], [Auth.Load] reads and checks
// them; [Auth.Options] are the nats.Options for bus.Config.Options.
type Auth struct {
	Creds        string // --creds: a .creds file
	NKey         string // --nkey: an NKEY seed file
	User         string // --user
	PasswordFile string // --password-file: the password of User
	TokenFile    string // --token-file
	TLSCA        string // --tls-ca: CA certificates (PEM) that sign the server's certificate
	TLSCert      string // --tls-cert: the client certificate (PEM)
	TLSKey       string // --tls-key: its private key (PEM)

	opts   []nats.Option // set by Load
	method string        // set by Load: how the connection authenticates
}

// AuthSettings are the settings of [Auth], checked into the field of C that
// field returns: --creds, --nkey, --user, --password-file, --token-file,
// --tls-ca, --tls-cert, --tls-key.
func AuthSettings[C any](field func(*C) *Auth) []*Setting[C] {
	path := func(dst func(*Auth) *string) func(*C, string) string {
		return func(c *C, v string) string {
			*dst(field(c)) = strings.TrimSpace(v)
			return ""
		}
	}
	return []*Setting[C]{
		{Name: "creds", Arg: "FILE", Usage: "NATS credentials file (.creds: a user JWT and its NKEY seed, from nsc)",
			Check: path(func(a *Auth) *string { return &a.Creds })},
		{Name: "nkey", Arg: "FILE", Usage: "NATS NKEY seed file (a user nkey the server lists)",
			Check: path(func(a *Auth) *string { return &a.NKey })},
		{Name: "user", Arg: "NAME", Usage: "NATS user; its password from " + PasswordEnv + " or --password-file (never on the command line)",
			Check: path(func(a *Auth) *string { return &a.User })},
		{Name: "password-file", Arg: "FILE", Usage: "file holding the password of --user (instead of " + PasswordEnv + ")",
			Check: path(func(a *Auth) *string { return &a.PasswordFile })},
		{Name: "token-file", Arg: "FILE", Usage: "file holding a NATS authentication token (or set " + TokenEnv + ")",
			Check: path(func(a *Auth) *string { return &a.TokenFile })},
		{Name: "tls-ca", Arg: "FILE", Usage: "CA certificates (PEM) to verify the NATS server's certificate with; implies TLS",
			Check: path(func(a *Auth) *string { return &a.TLSCA })},
		{Name: "tls-cert", Arg: "FILE", Usage: "client certificate (PEM) for servers that verify clients; needs --tls-key",
			Check: path(func(a *Auth) *string { return &a.TLSCert })},
		{Name: "tls-key", Arg: "FILE", Usage: "private key (PEM) of --tls-cert",
			Check: path(func(a *Auth) *string { return &a.TLSKey })},
	}
}

// Load reads the secrets the settings name, from getenv (EA_PASSWORD,
// EA_TOKEN) and the files, checks that they make one way to authenticate,
// and prepares [Auth.Options]. Its errors are *UsageError naming the flag
// or variable, never the secret.
func (a *Auth) Load(getenv func(string) string) error {
	a.opts, a.method = nil, "none"
	password, token := getenv(PasswordEnv), getenv(TokenEnv)
	var ways []string
	if a.Creds != "" {
		ways = append(ways, "--creds")
	}
	if a.NKey != "" {
		ways = append(ways, "--nkey")
	}
	if a.User != "" {
		ways = append(ways, "--user")
	}
	if token != "" || a.TokenFile != "" {
		if token != "" && a.TokenFile != "" {
			return Usagef("%s and --token-file are both set: give the token one way", TokenEnv)
		}
		ways = append(ways, "a token ("+TokenEnv+" or --token-file)")
	}
	if len(ways) > 1 {
		return Usagef("%s are set: choose one way to authenticate to NATS", strings.Join(ways, " and "))
	}
	if a.User == "" && (password != "" || a.PasswordFile != "") {
		return Usagef("a password (%s or --password-file) is set without --user: set --user too", PasswordEnv)
	}

	switch {
	case a.Creds != "":
		if err := readable(a.Creds); err != nil {
			return Usagef("--creds %q: %v", a.Creds, err)
		}
		a.opts = append(a.opts, nats.UserCredentials(a.Creds))
		a.method = "credentials file " + a.Creds
	case a.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return Usagef("--nkey %q: %v (want a file holding a user NKEY seed, SU...)", a.NKey, err)
		}
		a.opts = append(a.opts, opt)
		a.method = "nkey seed file " + a.NKey
	case a.User != "":
		switch {
		case password != "" && a.PasswordFile != "":
			return Usagef("%s and --password-file are both set: give the password of --user one way", PasswordEnv)
		case a.PasswordFile != "":
			p, err := readSecret(a.PasswordFile)
			if err != nil {
				return Usagef("--password-file %q: %v", a.PasswordFile, err)
			}
			password = p
		case password == "":
			return Usagef("--user %q has no password: set %s or --password-file", a.User, PasswordEnv)
		}
		a.opts = append(a.opts, nats.UserInfo(a.User, password))
		a.method = "user " + a.User
	case token != "" || a.TokenFile != "":
		if a.TokenFile != "" {
			t, err := readSecret(a.TokenFile)
			if err != nil {
				return Usagef("--token-file %q: %v", a.TokenFile, err)
			}
			token = t
		}
		a.opts = append(a.opts, nats.Token(token))
		a.method = "token"
	}

	if (a.TLSCert == "") != (a.TLSKey == "") {
		return Usagef("--tls-cert and --tls-key go together: set both (or neither)")
	}
	if a.TLSCA != "" {
		pem, err := os.ReadFile(a.TLSCA)
		if err != nil {
			return Usagef("--tls-ca %q: %v", a.TLSCA, err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return Usagef("--tls-ca %q: no PEM certificate in the file", a.TLSCA)
		}
		a.opts = append(a.opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(a.TLSCert, a.TLSKey); err != nil {
			return Usagef("--tls-cert %q, --tls-key %q: %v", a.TLSCert, a.TLSKey, err)
		}
		a.opts = append(a.opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	if a.TLSCA != "" || a.TLSCert != "" {
		a.method += ", TLS"
	}
	return nil
}

// Options are the nats.Options of the settings (credentials, TLS), for
// bus.Config.Options; nil before [Auth.Load] and when nothing is set.
func (a *Auth) Options() []nats.Option { return a.opts }

// Method says how the connection authenticates, for a log line: "none",
// "user alice", "credentials file x.creds", "token", with ", TLS" when TLS
// is set. It never holds a secret.
func (a *Auth) Method() string {
	if a.method == "" {
		return "none"
	}
	return a.method
}

// readable checks that path is a file this process can read.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// readSecret reads a secret from a file, without the trailing newline an
// editor or echo adds; an empty secret is an error.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("the file is empty")
	}
	return s, nil
}
