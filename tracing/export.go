package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exporter posts spans to an OTLP/HTTP receiver as protobuf: the client of
// the SDK's otlptrace exporter, which turns spans into ResourceSpans. It
// is ours rather than otlptracehttp's because that one links the OTLP
// collector package, whose generated gRPC stubs grow every binary by about
// 24 MB although only HTTP is used. The body is a TracesData message:
// field for field the same bytes as the ExportTraceServiceRequest the
// OTLP/HTTP specification names.
type exporter struct {
	url string
	settings
	client       *http.Client
	maxElapsed   time.Duration // all attempts of one batch
	firstBackoff time.Duration
}

// settings are the OTEL_EXPORTER_OTLP_* settings besides the endpoint and
// the protocol.
type settings struct {
	headers map[string]string
	timeout time.Duration // each attempt
	gzip    bool
	tls     *tls.Config // nil: the system's roots, no client certificate
}

// exportSettings reads the settings through getenv; the traces-specific
// variable wins over the general one.
func exportSettings(getenv func(string) string) (settings, error) {
	get := func(name string) (string, string) {
		specific := "OTEL_EXPORTER_OTLP_TRACES_" + name
		if v := strings.TrimSpace(getenv(specific)); v != "" {
			return v, specific
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	headers := map[string]string{}
	if v, name := get("HEADERS"); v != "" {
		for pair := range strings.SplitSeq(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return settings{}, fmt.Errorf("%w: %s: %q is not key=value (want e.g. api-key=secret,tenant=a)", ErrInvalid, name, strings.TrimSpace(pair))
			}
			dec, derr := url.PathUnescape(strings.TrimSpace(val))
			if derr != nil {
				return settings{}, fmt.Errorf("%w: %s: the value of %q is not percent-encoded correctly", ErrInvalid, name, k)
			}
			headers[k] = dec
		}
	}
	timeout := 10 * time.Second
	if v, name := get("TIMEOUT"); v != "" {
		ms, perr := strconv.Atoi(v)
		if perr != nil || ms <= 0 {
			return settings{}, fmt.Errorf("%w: %s %q: want a positive number of milliseconds, e.g. 10000", ErrInvalid, name, v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	gz := false
	switch v, name := get("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		gz = true
	default:
		return settings{}, fmt.Errorf("%w: %s %q: want gzip or none", ErrInvalid, name, v)
	}
	ca, caName := get("CERTIFICATE")
	cert, certName := get("CLIENT_CERTIFICATE")
	key, keyName := get("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return settings{headers: headers, timeout: timeout, gzip: gz}, nil
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, rerr := os.ReadFile(ca)
		if rerr != nil {
			return settings{}, fmt.Errorf("%w: %s: %w", ErrInvalid, caName, rerr)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return settings{}, fmt.Errorf("%w: %s %s: no PEM certificate in it", ErrInvalid, caName, ca)
		}
		tlsConf.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return settings{}, fmt.Errorf("%w: %s and %s go together: set both or neither", ErrInvalid, certName, keyName)
	}
	if cert != "" {
		pair, lerr := tls.LoadX509KeyPair(cert, key)
		if lerr != nil {
			return settings{}, fmt.Errorf("%w: %s / %s: %w", ErrInvalid, certName, keyName, lerr)
		}
		tlsConf.Certificates = []tls.Certificate{pair}
	}
	return settings{headers: headers, timeout: timeout, gzip: gz, tls: tlsConf}, nil
}

func newExporter(url string, set settings) *exporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = set.tls
	return &exporter{
		url: url, settings: set,
		client:       &http.Client{Transport: tr},
		maxElapsed:   time.Minute,
		firstBackoff: time.Second,
	}
}

// Start does nothing: connections are made per request.
func (e *exporter) Start(context.Context) error { return nil }

// Stop closes idle connections; requests in flight end with their context.
func (e *exporter) Stop(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// UploadTraces posts spans, retrying with backoff (or the receiver's
// Retry-After) while the receiver is throttling or unavailable, for up to
// a minute or until ctx ends.
func (e *exporter) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return fmt.Errorf("tracing: encode spans: %w", err)
	}
	if e.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(body); err != nil {
			return fmt.Errorf("tracing: compress spans: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("tracing: compress spans: %w", err)
		}
		body = b.Bytes()
	}
	deadline := time.Now().Add(e.maxElapsed)
	backoff := e.firstBackoff
	for {
		retry, wait, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		if wait < 0 {
			wait = backoff
			backoff = min(2*backoff, 30*time.Second)
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// post makes one attempt. A failure is worth another attempt (retry) when
// the receiver answered 429, 502, 503 or 504, as the OTLP specification
// lists them, or did not answer; wait is how long it asked to wait then
// with Retry-After (-1: it did not say).
func (e *exporter) post(ctx context.Context, body []byte) (retry bool, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("tracing: export to %s: %w", e.url, err)
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, -1, fmt.Errorf("tracing: export to %s: %w", e.url, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return false, 0, nil
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		wait = -1
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		}
		return true, wait, fmt.Errorf("tracing: export to %s: %s", e.url, resp.Status)
	default:
		return false, 0, fmt.Errorf("tracing: export to %s: %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
	}
}
