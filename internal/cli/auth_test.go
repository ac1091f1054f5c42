package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/effectors/effectors/internal/testcert"
)

type authConfig struct{ Auth Auth }

func parseAuth(t *testing.T, args []string, env map[string]string) (Auth, error) {
	t.Helper()
	var c authConfig
	if _, err := Parse("prog", AuthSettings(func(c *authConfig) *Auth { return &c.Auth }), args, envOf(env), &c); err != nil {
		return Auth{}, err
	}
	err := c.Auth.Load(envOf(env))
	return c.Auth, err
}

func TestAuth(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, empty, tok := file("pw", "s3cret\n"), file("empty", "\n"), file("tok", "t0ken")
	creds := file("x.creds", "not read until connect")
	certs := testcert.New(t, dir)
	notPEM := file("ca.txt", "hello")

	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		method string // "" when an error is wanted
		err    string
	}{
		{"nothing", nil, nil, "none", ""},
		{"user and EA_PASSWORD", []string{"--user", "alice"}, map[string]string{"EA_PASSWORD": "s3cret"}, "user alice", ""},
		{"user and password file", []string{"--user", "alice", "--password-file", pw}, nil, "user alice", ""},
		{"user from env", nil, map[string]string{"EA_USER": "bob", "EA_PASSWORD_FILE": pw}, "user bob", ""},
		{"token", nil, map[string]string{"EA_TOKEN": "t0ken"}, "token", ""},
		{"token file", []string{"--token-file", tok}, nil, "token", ""},
		{"creds", []string{"--creds", creds}, nil, "credentials file " + creds, ""},
		{"TLS", []string{"--tls-ca", certs.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}, nil, "none, TLS", ""},
		{"user and TLS", []string{"--user", "a", "--tls-ca", certs.CA}, map[string]string{"EA_PASSWORD": "p"}, "user a, TLS", ""},

		{"user without password", []string{"--user", "alice"}, nil, "", `--user "alice" has no password: set EA_PASSWORD or --password-file`},
		{"password without user", nil, map[string]string{"EA_PASSWORD": "s3cret"}, "", "a password (EA_PASSWORD or --password-file) is set without --user: set --user too"},
		{"password twice", []string{"--user", "a", "--password-file", pw}, map[string]string{"EA_PASSWORD": "x"}, "", "EA_PASSWORD and --password-file are both set: give the password of --user one way"},
		{"empty password file", []string{"--user", "a", "--password-file", empty}, nil, "", `--password-file "` + empty + `": the file is empty`},
		{"missing password file", []string{"--user", "a", "--password-file", dir + "/none"}, nil, "", `--password-file "` + dir + `/none": open ` + dir + `/none: no such file or directory`},
		{"token twice", []string{"--token-file", tok}, map[string]string{"EA_TOKEN": "x"}, "", "EA_TOKEN and --token-file are both set: give the token one way"},
		{"two ways", []string{"--user", "a", "--creds", creds}, map[string]string{"EA_PASSWORD": "p"}, "", "--creds and --user are set: choose one way to authenticate to NATS"},
		{"user and token", []string{"--user", "a"}, map[string]string{"EA_PASSWORD": "p", "EA_TOKEN": "t"}, "", "--user and a token (EA_TOKEN or --token-file) are set: choose one way to authenticate to NATS"},
		{"missing creds", []string{"--creds", dir + "/none.creds"}, nil, "", `--creds "` + dir + `/none.creds": open ` + dir + `/none.creds: no such file or directory`},
		{"bad nkey", []string{"--nkey", pw}, nil, "", `--nkey "` + pw + `": `},
		{"cert without key", []string{"--tls-cert", certs.ClientCert}, nil, "", "--tls-cert and --tls-key go together: set both (or neither)"},
		{"CA not PEM", []string{"--tls-ca", notPEM}, nil, "", `--tls-ca "` + notPEM + `": no PEM certificate in the file`},
		{"key of another cert", []string{"--tls-cert", certs.ClientCert, "--tls-key", certs.ServerKey}, nil, "", `--tls-cert "` + certs.ClientCert + `", --tls-key "` + certs.ServerKey + `": tls: private key does not match public key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := parseAuth(t, tc.args, tc.env)
			if tc.method != "" {
				if err != nil || a.Method() != tc.method {
					t.Fatalf("= %q, %v; want %q", a.Method(), err, tc.method)
				}
				if (tc.method == "none") != (len(a.Options()) == 0) {
					t.Errorf("%d nats options for %s", len(a.Options()), tc.method)
				}
				return
			}
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("= %v, want a usage error starting %q", err, tc.err)
			}
			for _, secret := range []string{"s3cret", "t0ken"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
	// No flag takes a secret itself.
	for _, flag := range []string{"--password", "--token"} {
		if _, err := parseAuth(t, []string{flag, "x"}, nil); err == nil || err.Error() != "flag provided but not defined: "+strings.TrimPrefix(flag, "-") {
			t.Errorf("%s: %v, want flag not defined", flag, err)
		}
	}
}
