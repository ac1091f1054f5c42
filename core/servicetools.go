package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Limits of service tools.
const (
	// DefaultServiceTimeout bounds one call of a service tool whose
	// description gives no timeout.
	DefaultServiceTimeout = 30 * time.Second
	// MaxServiceResult is the largest answer a service tool hands to the
	// model, in bytes; a larger one is an error the model sees, never cut.
	MaxServiceResult = 256 << 10
	// MaxServiceTools is the most tools one description file may hold.
	MaxServiceTools = 256
	// maxServiceFile bounds the description file.
	maxServiceFile = 4 << 20
)

// ToolFile is a description of services of the user's own — NATS
// request-reply subjects (a NATS micro service's endpoints are such
// subjects) and HTTP endpoints — each offered to the model as a tool: the
// file a node's --tools names. In JSON:
//
//	{"tools": [
//	  {"name": "weather", "description": "the forecast for a city",
//	   "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
//	   "nats": {"subject": "weather.forecast"}, "timeout": "5s"},
//	  {"name": "geocode", "description": "coordinates of a place",
//	   "http": {"url": "https://geo.example.com/v1/lookup", "headers": {"Authorization": "Bearer ${GEO_TOKEN}"}}}
//	]}
type ToolFile struct {
	Tools []ServiceTool `json:"tools"`
}

// ServiceTool is one service offered as a tool. Exactly one of NATS and
// HTTP is set.
type ServiceTool struct {
	// Name is the tool's name the model calls (1-64 characters of A-Z a-z
	// 0-9 _ -).
	Name string `json:"name"`
	// Description tells the model what the tool does. Required.
	Description string `json:"description"`
	// Schema is the JSON schema of the arguments, an object; empty: an
	// object with any properties.
	Schema json.RawMessage `json:"schema,omitempty"`
	// NATS: the arguments are sent as a JSON request to Subject; the reply's
	// body is the result. A NATS micro service's error headers
	// (Nats-Service-Error, Nats-Service-Error-Code) make it an error.
	NATS *NATSService `json:"nats,omitempty"`
	// HTTP: the arguments are POSTed as JSON to URL (or, with method GET,
	// sent as query parameters); a 2xx answer's body is the result.
	HTTP *HTTPService `json:"http,omitempty"`
	// Timeout bounds one call, e.g. "5s"; empty: DefaultServiceTimeout.
	Timeout string `json:"timeout,omitempty"`
}

// NATSService is a service reached over NATS request-reply.
type NATSService struct {
	Subject string `json:"subject"`
}

// HTTPService is a service reached over HTTP.
type HTTPService struct {
	URL string `json:"url"`
	// Method is POST (the default), PUT or GET.
	Method string `json:"method,omitempty"`
	// Headers are sent with every call; ${NAME} (or $NAME) in a value is
	// replaced by the environment variable NAME when the file is loaded, so
	// secrets need not be in the file; a variable not set is an error.
	Headers map[string]string `json:"headers,omitempty"`
}

// LoadToolFile reads and checks a description of service tools (see
// [ToolFile]) from path. getenv expands ${NAME} in HTTP headers (nil:
// os.Getenv). Every problem is a CodeInvalid error naming the file, the
// tool and what is wrong.
func LoadToolFile(path string, getenv func(string) string) (ToolFile, error) {
	const op = "tools.load"
	f, err := os.Open(path)
	if err != nil {
		return ToolFile{}, Errorf(CodeInvalid, op, "%w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxServiceFile+1))
	if err != nil {
		return ToolFile{}, Errorf(CodeInvalid, op, "%s: %w", path, err)
	}
	if len(data) > maxServiceFile {
		return ToolFile{}, Errorf(CodeInvalid, op, "%s: larger than %d bytes", path, maxServiceFile)
	}
	st, err := parseToolFile(data, getenv)
	if err != nil {
		return ToolFile{}, Errorf(CodeInvalid, op, "%s: %w", path, err)
	}
	return st, nil
}

// ParseToolFile decodes and checks a description of service tools (see
// [ToolFile]); getenv expands ${NAME} in HTTP headers (nil: os.Getenv).
// Every problem is a CodeInvalid error naming the tool and what is wrong.
func ParseToolFile(data []byte, getenv func(string) string) (ToolFile, error) {
	st, err := parseToolFile(data, getenv)
	if err != nil {
		return ToolFile{}, E(CodeInvalid, "tools.parse", err)
	}
	return st, nil
}

func parseToolFile(data []byte, getenv func(string) string) (ToolFile, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var st ToolFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return ToolFile{}, fmt.Errorf(`want JSON {"tools": [{"name", "description", "schema", "nats": {"subject"} or "http": {"url"}}]}: %w`, err)
	}
	if dec.More() {
		return ToolFile{}, errors.New("trailing data after the JSON object")
	}
	if len(st.Tools) == 0 {
		return ToolFile{}, errors.New(`no tools: want {"tools": [...]} with at least one`)
	}
	if len(st.Tools) > MaxServiceTools {
		return ToolFile{}, fmt.Errorf("%d tools, at most %d", len(st.Tools), MaxServiceTools)
	}
	seen := map[string]bool{}
	for i := range st.Tools {
		t := &st.Tools[i]
		if err := t.check(getenv); err != nil {
			if t.Name != "" {
				return ToolFile{}, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			return ToolFile{}, fmt.Errorf("tool %d: %w", i+1, err)
		}
		if seen[t.Name] {
			return ToolFile{}, fmt.Errorf("tool %q is described twice", t.Name)
		}
		seen[t.Name] = true
	}
	return st, nil
}

// check validates t, fills in defaults and expands header variables
// (into a new map: the one given is left as it is).
func (t *ServiceTool) check(getenv func(string) string) error {
	if err := t.validate(); err != nil {
		return err
	}
	if t.HTTP == nil || len(t.HTTP.Headers) == 0 {
		return nil
	}
	headers := make(map[string]string, len(t.HTTP.Headers))
	for k, v := range t.HTTP.Headers {
		var missing []string
		v = os.Expand(v, func(name string) string {
			val := getenv(name)
			if val == "" {
				missing = append(missing, name)
			}
			return val
		})
		if len(missing) > 0 {
			return fmt.Errorf("http header %s names the environment variable %s, which is not set", k, strings.Join(missing, ", "))
		}
		if strings.ContainsAny(k+v, "\r\n") {
			return fmt.Errorf("http header %s holds a line break", k)
		}
		headers[k] = v
	}
	h := *t.HTTP
	h.Headers = headers
	t.HTTP = &h
	return nil
}

// validate checks t and fills in defaults, without expanding variables.
func (t *ServiceTool) validate() error {
	if err := checkName("tools.load", "tool", t.Name); err != nil {
		return err
	}
	if strings.TrimSpace(t.Description) == "" {
		return errors.New("no description: the model needs one to know when to call it")
	}
	if _, err := t.schema(); err != nil {
		return err
	}
	if t.Timeout != "" {
		d, err := time.ParseDuration(t.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q: want a positive duration such as 5s", t.Timeout)
		}
	}
	switch {
	case (t.NATS == nil) == (t.HTTP == nil):
		return errors.New(`want exactly one of "nats": {"subject": ...} and "http": {"url": ...}`)
	case t.NATS != nil:
		if err := checkSubject(t.NATS.Subject); err != nil {
			return fmt.Errorf("nats subject %q: %w", t.NATS.Subject, err)
		}
	default:
		u, err := url.Parse(t.HTTP.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("http url %q: want an http(s) URL", t.HTTP.URL)
		}
		h := *t.HTTP
		switch m := strings.ToUpper(h.Method); m {
		case "":
			h.Method = http.MethodPost
		case http.MethodPost, http.MethodPut, http.MethodGet:
			h.Method = m
		default:
			return fmt.Errorf("http method %q: want POST, PUT or GET", h.Method)
		}
		t.HTTP = &h
	}
	return nil
}

// checkSubject accepts a literal NATS subject: dot-separated tokens, no
// wildcards, no spaces, bounded, and none of the server's own ($JS.API,
// $KV, $SRV…) or reply inboxes: a model's arguments must not reach them.
func checkSubject(s string) error {
	if s == "" || len(s) > 255 {
		return errors.New("want a NATS subject of 1-255 characters")
	}
	if strings.HasPrefix(s, "$") || strings.HasPrefix(s, "_INBOX.") {
		return errors.New("a $ subject (the server's own API) or a reply inbox may not be a tool: name your service's subject")
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return errors.New("want dot-separated tokens without wildcards or spaces, e.g. weather.forecast")
		}
	}
	return nil
}

// schema is the tool's argument schema: Schema, or any object.
func (t ServiceTool) schema() (*jsonschema.Schema, error) {
	if len(t.Schema) == 0 {
		return &jsonschema.Schema{Type: "object"}, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(t.Schema, &s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if s.Type != "object" {
		return nil, errors.New(`schema: want a JSON schema of an object ("type": "object")`)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &s, nil
}

func (t ServiceTool) timeout() time.Duration {
	if d, err := time.ParseDuration(t.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultServiceTimeout
}

// Build returns the tools of st: NATS services are asked over nc (nil is
// an error when some tool needs it), HTTP services with client (nil:
// a client of its own).
func (st ToolFile) Build(nc *nats.Conn, client *http.Client) ([]Tool, error) {
	out := make([]Tool, 0, len(st.Tools))
	for _, t := range st.Tools {
		tool, err := t.Tool(nc, client)
		if err != nil {
			return nil, err
		}
		out = append(out, tool)
	}
	return out, nil
}

// Tool returns the tool calling the service (see [ServiceTool]); ${NAME}
// in its headers is not expanded here ([ParseToolFile] does). A service
// that fails, answers an error or does not answer in time gives an error the
// tool-call loop hands to the model ("error: …") to recover from; only the
// caller's context ending ends the loop.
func (t ServiceTool) Tool(nc *nats.Conn, client *http.Client) (Tool, error) {
	const op = "tools.service"
	if err := t.validate(); err != nil {
		return Tool{}, Errorf(CodeInvalid, op, "tool %q: %w", t.Name, err)
	}
	s, err := t.schema()
	if err != nil {
		return Tool{}, Errorf(CodeInvalid, op, "tool %q: %w", t.Name, err)
	}
	tool := Tool{Name: t.Name, Description: t.Description, Schema: s}
	switch {
	case t.NATS != nil:
		if nc == nil {
			return Tool{}, Errorf(CodeInvalid, op, "tool %q is a NATS service: needs a NATS connection", t.Name)
		}
		tool.Call = t.natsCall(nc)
	default:
		if client == nil {
			client = &http.Client{}
		}
		tool.Call = t.httpCall(client)
	}
	return tool, nil
}

// serviceErr is the error of a call: cancelled when the caller's ctx ended,
// otherwise code (the model sees it and may try again or do without).
func serviceErr(ctx context.Context, op string, code Code, err error) error {
	if ctx.Err() != nil {
		c := CodeCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c = CodeTimeout
		}
		return E(c, op, context.Cause(ctx))
	}
	return E(code, op, err)
}

func (t ServiceTool) natsCall(nc *nats.Conn) func(context.Context, json.RawMessage) (string, error) {
	op, subject, timeout := "tool "+t.Name, t.NATS.Subject, t.timeout()
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		msg := nats.NewMsg(subject)
		msg.Data = args
		msg.Header.Set("Content-Type", "application/json")
		reply, err := nc.RequestMsgWithContext(cctx, msg)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return "", serviceErr(ctx, op, CodeUnavailable, fmt.Errorf("no service answers on %s", subject))
		case err != nil && cctx.Err() != nil && ctx.Err() == nil:
			return "", serviceErr(ctx, op, CodeUnavailable, fmt.Errorf("the service on %s did not answer within %s", subject, timeout))
		case err != nil:
			return "", serviceErr(ctx, op, CodeUnavailable, err)
		}
		if desc := reply.Header.Get(micro.ErrorHeader); desc != "" {
			return "", E(CodeFailed, op, fmt.Errorf("the service answered error %s: %s", reply.Header.Get(micro.ErrorCodeHeader), desc))
		}
		if len(reply.Data) > MaxServiceResult {
			return "", Errorf(CodeFailed, op, "the answer is %d bytes, more than the %d a tool result may be", len(reply.Data), MaxServiceResult)
		}
		return string(reply.Data), nil
	}
}

func (t ServiceTool) httpCall(client *http.Client) func(context.Context, json.RawMessage) (string, error) {
	op, h, timeout := "tool "+t.Name, *t.HTTP, t.timeout()
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		target, body := h.URL, io.Reader(bytes.NewReader(args))
		if h.Method == http.MethodGet {
			q, err := queryOf(h.URL, args)
			if err != nil {
				return "", E(CodeInvalid, op, err)
			}
			target, body = q, nil
		}
		req, err := http.NewRequestWithContext(cctx, h.Method, target, body)
		if err != nil {
			return "", E(CodeInvalid, op, err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/plain")
		for k, v := range h.Headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			if cctx.Err() != nil && ctx.Err() == nil {
				return "", E(CodeUnavailable, op, fmt.Errorf("%s did not answer within %s", redactURL(h.URL), timeout))
			}
			return "", serviceErr(ctx, op, CodeUnavailable, fmt.Errorf("%s %s: %w", h.Method, redactURL(h.URL), unwrapURLError(err)))
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxServiceResult+1))
		if err != nil {
			return "", serviceErr(ctx, op, CodeUnavailable, fmt.Errorf("read the answer: %w", err))
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			excerpt := strings.TrimSpace(string(data))
			if len(excerpt) > 512 {
				excerpt = excerpt[:512] + "…"
			}
			return "", Errorf(CodeFailed, op, "%s answered %s: %s", redactURL(h.URL), resp.Status, excerpt)
		}
		if len(data) > MaxServiceResult {
			return "", Errorf(CodeFailed, op, "the answer is more than the %d bytes a tool result may be", MaxServiceResult)
		}
		return string(data), nil
	}
}

// queryOf adds the arguments (a JSON object of scalars) to u as query
// parameters.
func queryOf(u string, args json.RawMessage) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return "", fmt.Errorf("arguments of a GET service: want a JSON object: %w", err)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	q := parsed.Query()
	for k, v := range m {
		switch v := v.(type) {
		case string:
			q.Set(k, v)
		case float64:
			q.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
		case bool:
			q.Set(k, strconv.FormatBool(v))
		case nil:
		default:
			return "", fmt.Errorf("argument %q of a GET service is not a string, number or bool: send it with POST", k)
		}
	}
	parsed.RawQuery = q.Encode()
	return parsed.String(), nil
}

// redactURL drops the query and credentials of u for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the service"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}

// unwrapURLError keeps the cause of a *url.Error (whose text repeats the
// URL, query and all).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
