// Package tracingtest is a real OTLP/HTTP trace receiver for tests, shaped
// like httptest: [NewReceiver] starts one on a random port, [Receiver.URL]
// is the endpoint to give a process (--otlp-endpoint, tracing.Config), and
// [Receiver.Spans] returns the spans it has received, decoded from the
// OTLP protobuf the exporter posts.
package tracingtest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span as a receiver got it.
type Span struct {
	Service  string // the resource's service.name
	Name     string
	Kind     string // "server", "client", "producer", "consumer", "internal"
	TraceID  string // 32 hex digits
	SpanID   string // 16 hex digits
	ParentID string // 16 hex digits; "" for a root span
	Attrs    map[string]string
	Failed   bool // its status is an error
}

// String is the span in one line, for test failures.
func (s Span) String() string {
	return fmt.Sprintf("%s %q (%s) trace %s span %s parent %s attrs %v", s.Service, s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentID, s.Attrs)
}

// Receiver is an OTLP/HTTP receiver of traces (POST /v1/traces,
// application/x-protobuf, optionally gzip-compressed).
type Receiver struct {
	// URL is the base URL of the receiver, e.g. http://127.0.0.1:39999:
	// what --otlp-endpoint and OTEL_EXPORTER_OTLP_ENDPOINT take.
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	headers []http.Header // of each request decoded
	errs    []error
}

// NewReceiver starts a receiver, closed when the test ends. A request it
// cannot decode fails the test.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.errs {
			t.Errorf("OTLP receiver: %v", err)
		}
	})
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	err := r.receive(req)
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// An empty ExportTraceServiceResponse: full success, no bytes.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (r *Receiver) receive(req *http.Request) error {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		return fmt.Errorf("%s %s: want POST /v1/traces", req.Method, req.URL.Path)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return fmt.Errorf("content type %q: want application/x-protobuf", ct)
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return err
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		return err
	}
	// TracesData has the same fields as ExportTraceServiceRequest (the
	// collector package that declares the latter links gRPC).
	var m tracepb.TracesData
	if err := proto.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode ExportTraceServiceRequest: %w", err)
	}
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	var got []Span
	for _, rs := range m.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Service: service, Name: s.GetName(), Kind: kind(s.GetKind()),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Attrs:  attrs(s.GetAttributes()),
					Failed: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				}
				if p := s.GetParentSpanId(); len(p) > 0 && !bytes.Equal(p, make([]byte, 8)) {
					sp.ParentID = hex.EncodeToString(p)
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return nil
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers returns the HTTP headers of each request received so far, in the
// order they came.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Trace returns the spans of trace id received so far.
func (r *Receiver) Trace(id string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// Tree formats spans as an indented tree of parent and children, for test
// failures.
func Tree(spans []Span) string {
	byParent := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	for _, s := range spans {
		p := s.ParentID
		if !ids[p] {
			p = "" // a root, or a parent not received
		}
		byParent[p] = append(byParent[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := byParent[parent]
		sort.SliceStable(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
		for _, s := range kids {
			fmt.Fprintf(&b, "%s%s: %s (%s) %s parent %s\n", strings.Repeat("  ", depth), s.Service, s.Name, s.Kind, s.SpanID, s.ParentID)
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

func kind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "internal"
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
