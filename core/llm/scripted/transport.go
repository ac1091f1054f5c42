package scripted

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// Transport returns an http.RoundTripper that serves every request with h
// in this process: no listener, no port, nothing on the network. The
// response streams as h writes it (each write reaches the client's reads
// as it is made, so server-sent events arrive one by one); closing the
// response body, or ending the request's context, ends the request's
// context as h sees it and makes its further writes fail.
func Transport(h http.Handler) http.RoundTripper { return transport{h: h} }

type transport struct{ h http.Handler }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	// A request that ends while h writes: its writes fail at once.
	stop := context.AfterFunc(ctx, func() { _ = pr.CloseWithError(context.Cause(ctx)) })
	w := &pipeWriter{header: http.Header{}, body: pw, started: make(chan struct{})}
	go func() {
		defer stop()
		t.h.ServeHTTP(w, in)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		_ = pw.Close()
	}()
	select {
	case <-w.started:
	case <-ctx.Done():
		cancel()
		return nil, context.Cause(ctx)
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &body{r: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeWriter is the http.ResponseWriter of one in-process request: its body
// goes to the client through a pipe.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter

	once    sync.Once
	started chan struct{} // closed by the first WriteHeader
	status  int           // set before started is closed
	sent    http.Header   // the header as it was when started was closed
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush does nothing: every write reaches the client when it reads it.
func (w *pipeWriter) Flush() {}

// body is a response body: closing it ends the request.
type body struct {
	r      *io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *body) Close() error {
	b.cancel()
	return b.r.Close()
}
