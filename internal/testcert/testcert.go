// Package testcert makes a throwaway certificate authority with a server
// certificate (for 127.0.0.1 and localhost) and a client certificate, as PEM
// files, for tests of TLS connections to NATS.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files New writes.
type Files struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string // for 127.0.0.1, ::1 and localhost
	ClientCert, ClientKey string // a client certificate (CN "client")
}

// New writes a new CA, a server and a client certificate to dir.
func New(t testing.TB, dir string) Files {
	t.Helper()
	caKey, caCert, caDER := issue(t, "effectors test CA", nil, nil, true)
	f := Files{CA: filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	write(t, f.CA, "CERTIFICATE", caDER)
	for _, c := range []struct {
		cn        string
		cert, key string
	}{{"localhost", f.ServerCert, f.ServerKey}, {"client", f.ClientCert, f.ClientKey}} {
		key, _, der := issue(t, c.cn, caCert, caKey, false)
		write(t, c.cert, "CERTIFICATE", der)
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(t, c.key, "EC PRIVATE KEY", kb)
	}
	return f
}

// issue makes a key and a certificate for cn signed by parent (itself when
// nil).
func issue(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func write(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
