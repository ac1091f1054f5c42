package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// session is one WebSocket connection.
//
// Goroutines: the handler's (reads frames and answers requests in order),
// the writer (writes queued frames), one per subscription. All are awaited
// before the handler returns.
type session struct {
	g   *Gateway
	ws  *websocket.Conn
	log *slog.Logger
	q   *sendQueue

	ctx    context.Context // ends when the session fails or the gateway closes
	cancel context.CancelFunc

	failOnce sync.Once
	closed   chan struct{} // closed once the close frame went out (or failed)

	authorized bool // read and written by the handler's goroutine only
	// cred is what the connection authenticated with (nil until then); the
	// users file's reloader reads it to revoke.
	cred atomic.Pointer[credential]

	writing atomic.Int64 // when the write in progress started (unix ns), 0 when none

	mu   sync.Mutex // guards subs
	subs map[string]context.CancelFunc
	wg   sync.WaitGroup // subscriptions and the writer
}

func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: g.cfg.Origins})
	if err != nil {
		// Accept answered already (403 for a foreign origin, 400 for a bad
		// handshake), saying why.
		g.cfg.Logger.Debug("gateway: upgrade refused", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		return
	}
	ctx, cancel := context.WithCancel(g.base)
	s := &session{
		g: g, ws: ws, q: newSendQueue(g.cfg.SendBuffer), ctx: ctx, cancel: cancel,
		closed: make(chan struct{}), subs: map[string]context.CancelFunc{},
		log: g.cfg.Logger.With("remote", r.RemoteAddr),
	}
	if !g.add(s) {
		cancel()
		_ = ws.Close(websocket.StatusGoingAway, "gateway stopping")
		return
	}
	defer g.remove(s)
	g.metrics.connections.Inc()
	defer g.metrics.connections.Dec()
	s.run(r)
}

// run serves the connection until it ends.
func (s *session) run(r *http.Request) {
	cfg := s.g.cfg
	s.ws.SetReadLimit(cfg.MaxFrame)
	stopOnClose := context.AfterFunc(s.ctx, func() { s.fail(websocket.StatusGoingAway, "gateway stopping", "stopping") })
	defer stopOnClose()

	s.wg.Add(1)
	go s.writer()

	var authTimer *time.Timer // waits for the auth frame; stopped once it came
	if !s.g.authOn() {
		s.authorize(credential{id: Identity{Role: RoleAdmin}})
	} else if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			s.fail(CloseUnauthorized, "unauthorized: want the header Authorization: Bearer <token>", "unauthorized")
		} else if c, reason, ok := s.g.authenticate(tok); !ok {
			s.fail(CloseUnauthorized, reason, "unauthorized")
		} else {
			s.authorize(c)
		}
	} else {
		authTimer = time.AfterFunc(cfg.AuthTimeout, func() {
			s.fail(CloseUnauthorized, fmt.Sprintf("unauthorized: no auth frame within %s", cfg.AuthTimeout), "unauthorized")
		})
		defer authTimer.Stop()
	}
	if s.authorized {
		s.welcome("")
	}

	// Reads are not tied to s.ctx: a failing session closes the WebSocket
	// with its reason, which ends the read.
	readCtx := context.WithoutCancel(s.ctx)
	for {
		typ, data, err := s.ws.Read(readCtx)
		if err != nil {
			s.readFailed(err)
			break
		}
		if typ != websocket.MessageText {
			if !s.authorized {
				s.fail(CloseUnauthorized, "unauthorized: the first frame must be {\"type\":\"auth\",\"token\":\"…\"}", "unauthorized")
				continue
			}
			s.errorFrame(head{}, CodeBadFrame, "binary frames are not accepted: send JSON text frames")
			continue
		}
		s.handle(data)
		if authTimer != nil && s.authorized {
			authTimer.Stop()
			authTimer = nil
		}
	}
	s.cancel()
	s.q.close()
	s.wg.Wait()
	s.mu.Lock()
	s.g.metrics.subscriptions.Sub(float64(len(s.subs)))
	s.subs = nil
	s.mu.Unlock()
	_, peak := s.q.stats()
	s.g.metrics.queued.Observe(float64(peak))
	<-s.closed
}

// readFailed records why reading ended.
func (s *session) readFailed(err error) {
	var ce websocket.CloseError
	started := s.writing.Load()
	switch {
	case started != 0 && time.Since(time.Unix(0, started)) >= s.g.cfg.SlowReader:
		// The WebSocket closes itself when a write times out; the reader
		// may see that first.
		s.fail(CloseSlowReader, slowReason(s.g.cfg.SlowReader), "slow_reader")
	case errors.Is(err, websocket.ErrMessageTooBig), errors.As(err, &ce) && ce.Code == websocket.StatusMessageTooBig:
		// Over the read limit: the library wrote the 1009 close frame
		// with its reason already; reading returns ErrMessageTooBig, not
		// a CloseError.
		s.fail(websocket.StatusMessageTooBig, "", "frame_too_large")
	case errors.As(err, &ce):
		s.fail(websocket.StatusNormalClosure, "", "client")
	case errors.Is(err, io.EOF):
		s.fail(websocket.StatusNormalClosure, "", "client")
	default:
		s.fail(websocket.StatusInternalError, "", "error")
		s.log.Debug("gateway: read", "err", err)
	}
}

// fail ends the session once: subscriptions stop, queued frames are
// dropped, and the WebSocket is closed with code and reason (when it is
// still open). reason is the metric label.
func (s *session) fail(code websocket.StatusCode, text, reason string) {
	s.failOnce.Do(func() {
		s.g.metrics.disconnects.WithLabelValues(reason).Inc()
		if reason != "client" && reason != "stopping" {
			s.log.Info("gateway: connection closed", "code", int(code), "reason", text)
		}
		s.cancel()
		s.q.close()
		go func() {
			defer close(s.closed)
			if text == "" {
				_ = s.ws.CloseNow()
				return
			}
			_ = s.ws.Close(code, text)
		}()
	})
}

// writer writes queued frames until the session ends. A write that takes
// longer than twice SlowReader fails the session (and closes the socket).
func (s *session) writer() {
	defer s.wg.Done()
	for {
		b, err := s.q.pop(s.ctx)
		if err != nil {
			return
		}
		// Twice SlowReader: a client stalled that long has been failed by
		// a producer waiting for room already, and the close frame with the
		// reason still reaches it if it reads again meanwhile.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 2*s.g.cfg.SlowReader)
		s.writing.Store(time.Now().UnixNano())
		err = s.ws.Write(wctx, websocket.MessageText, b)
		s.writing.Store(0)
		timedOut := wctx.Err() != nil
		cancel()
		s.q.done(b)
		if err != nil {
			if timedOut {
				s.fail(CloseSlowReader, slowReason(s.g.cfg.SlowReader), "slow_reader")
			} else {
				s.fail(websocket.StatusInternalError, "", "error")
			}
			return
		}
	}
}

func slowReason(d time.Duration) string {
	return fmt.Sprintf("slow reader: frames waited over %s for the client to read", d)
}

// send queues frame v for the client, waiting up to SlowReader for room;
// a client too slow is disconnected, and send returns an error.
func (s *session) send(typ string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("gateway: encode frame", "type", typ, "err", err)
		return err
	}
	err = s.q.push(s.ctx, b, s.g.cfg.SlowReader)
	if errors.Is(err, errSlowReader) {
		s.fail(CloseSlowReader, slowReason(s.g.cfg.SlowReader), "slow_reader")
	}
	if err == nil {
		s.g.metrics.frames.WithLabelValues("out", typ).Inc()
	}
	return err
}

func (s *session) errorFrame(h head, code, msg string) {
	_ = s.send(TypeError, ErrorFrame{Type: TypeError, Req: h.Req, Sub: h.Sub, Code: code, Error: msg})
}

// welcome sends the welcome frame, answering req (the auth frame's).
func (s *session) welcome(req string) {
	c := s.g.cfg
	id := s.identity()
	_ = s.send(TypeWelcome, WelcomeFrame{
		Type: TypeWelcome, Req: req, Version: ProtocolVersion, Prefix: s.g.names.Prefix(),
		MaxFrame: c.MaxFrame, MaxSubscriptions: c.MaxSubscriptions, SendBuffer: c.SendBuffer,
		User: id.Name, Role: id.Role,
	})
}

// authorize makes c the connection's credential. A users-file token is
// checked again against the users as they are now: a reload that revoked it
// between the check and this store either sees the credential or is seen
// here.
func (s *session) authorize(c credential) {
	s.cred.Store(&c)
	if c.fromFile {
		if id, ok := s.g.users.Load().lookupHash(c.sum); !ok || id != c.id {
			s.fail(CloseUnauthorized, "unauthorized: token revoked", "revoked")
			return
		}
	}
	s.authorized = true
}

// identity returns who the connection acts as (the zero Identity before it
// is authorized).
func (s *session) identity() Identity {
	if c := s.cred.Load(); c != nil {
		return c.id
	}
	return Identity{}
}

// reauth answers an auth frame on an authorized connection: the token is
// checked again. A token that does not authenticate closes the connection
// (4401), as it would have as the first frame; a token of another identity
// is refused (a connection has one identity); the same identity's token, or
// any frame on a gateway without authentication, is answered with
// {"authorized": true, "user", "role"}.
func (s *session) reauth(h head, data []byte) {
	id := s.identity()
	if s.g.authOn() {
		var a struct{ Token string }
		if err := json.Unmarshal(data, &a); err != nil {
			s.errorFrame(h, CodeBadRequest, fmt.Sprintf("auth frame: %v", err))
			return
		}
		c, reason, ok := s.g.authenticate(a.Token)
		if !ok {
			s.fail(CloseUnauthorized, reason, "unauthorized")
			return
		}
		if c.id != id {
			s.errorFrame(h, CodeBadRequest, fmt.Sprintf("auth frame: this connection is authorized as %s already; open another connection to act as %s", describe(id), describe(c.id)))
			return
		}
	}
	_ = s.send(TypeResult, resultFrame{Type: TypeResult, Req: h.Req, Result: authResult{Authorized: true, User: id.Name, Role: id.Role}})
}

// authResult answers an auth frame on an authorized connection.
type authResult struct {
	Authorized bool   `json:"authorized"`
	User       string `json:"user,omitempty"`
	Role       Role   `json:"role"`
}

func describe(id Identity) string {
	if id.Name == "" {
		return string(id.Role)
	}
	return fmt.Sprintf("%s (%s)", id.Name, id.Role)
}

// maxName bounds req and sub names.
const maxName = 128

// handle answers one text frame.
func (s *session) handle(data []byte) {
	var h head
	if err := json.Unmarshal(data, &h); err != nil {
		if !s.authorized {
			s.fail(CloseUnauthorized, "unauthorized: the first frame must be {\"type\":\"auth\",\"token\":\"…\"}", "unauthorized")
			return
		}
		s.errorFrame(head{}, CodeBadFrame, fmt.Sprintf("not a JSON object with a string \"type\": %v", err))
		return
	}
	if len(h.Req) > maxName || len(h.Sub) > maxName {
		if !s.authorized {
			s.fail(CloseUnauthorized, "unauthorized: the first frame must be {\"type\":\"auth\",\"token\":\"…\"}", "unauthorized")
			return
		}
		s.errorFrame(head{}, CodeBadRequest, fmt.Sprintf("req and sub are at most %d bytes", maxName))
		return
	}
	if !s.authorized {
		if h.Type != TypeAuth {
			s.fail(CloseUnauthorized, "unauthorized: the first frame must be {\"type\":\"auth\",\"token\":\"…\"}", "unauthorized")
			return
		}
		var a struct {
			Type, Req, Token string
		}
		if err := json.Unmarshal(data, &a); err != nil {
			s.fail(CloseUnauthorized, "unauthorized: the first frame must be {\"type\":\"auth\",\"token\":\"…\"}", "unauthorized")
			return
		}
		c, reason, ok := s.g.authenticate(a.Token)
		if !ok {
			s.fail(CloseUnauthorized, reason, "unauthorized")
			return
		}
		s.authorize(c)
		if s.authorized {
			s.welcome(h.Req)
		}
		return
	}
	s.g.metrics.frames.WithLabelValues("in", frameLabel(h.Type)).Inc()
	switch h.Type {
	case TypeAuth:
		s.reauth(h, data)
	case TypePing:
		_ = s.send(TypePong, head{Type: TypePong, Req: h.Req})
	case TypeSend:
		var f SendFrame
		if s.decode(h, data, &f) {
			s.handleSend(h, f)
		}
	case TypeSubscribe:
		var f SubscribeFrame
		if s.decode(h, data, &f) {
			s.subscribe(h, f)
		}
	case TypeUnsubscribe:
		var f struct {
			Type string `json:"type"`
			Req  string `json:"req"`
			Sub  string `json:"sub"`
		}
		if s.decode(h, data, &f) {
			s.unsubscribe(h)
		}
	case TypeState, TypeKinds, TypeEffectors, TypeQuery, TypeGet, TypeCreate, TypeTerminate,
		TypeOrchStart, TypeOrchStatus, TypeOrchInput, TypeOrchCancel,
		TypeDeadReplay, TypeDeadDiscard, TypeNodes, TypeDeadList, TypeOrchList:
		s.request(h, data)
	case "":
		s.errorFrame(h, CodeBadFrame, "missing \"type\": say what the frame is (send, subscribe, unsubscribe, state, query, orch.start, …)")
	default:
		s.errorFrame(h, CodeUnknownType, fmt.Sprintf("unknown frame type %q: see docs/gateway.md for the frame types", truncate(h.Type, 64)))
	}
}

// frameLabel bounds the metric's type label to known frame types.
func frameLabel(t string) string {
	switch t {
	case TypeAuth, TypePing, TypeSend, TypeSubscribe, TypeUnsubscribe, TypeState, TypeKinds, TypeEffectors,
		TypeQuery, TypeGet, TypeCreate, TypeTerminate, TypeOrchStart, TypeOrchStatus, TypeOrchInput, TypeOrchCancel,
		TypeDeadReplay, TypeDeadDiscard, TypeNodes, TypeDeadList, TypeOrchList:
		return t
	}
	return "unknown"
}

// decode decodes data into v strictly (unknown fields are an error),
// answering a bad_request error frame when it fails.
func (s *session) decode(h head, data []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.errorFrame(h, CodeBadRequest, fmt.Sprintf("%s frame: %v", h.Type, err))
		return false
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// resultFrame answers a request.
type resultFrame struct {
	Type   string `json:"type"`
	Req    string `json:"req,omitempty"`
	Result any    `json:"result"`
}

// decodeStrict decodes one JSON object, refusing unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
