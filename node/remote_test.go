package node

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/actor/actortest"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/remote"
)

func TestRemoteKindsSetting(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    []remoteKind
		timeout time.Duration
		err     string
	}{
		{nil, nil, nil, 10 * time.Second, ""},
		{[]string{"--remote-kinds", "counter"}, nil, []remoteKind{{"counter", remote.JSON}}, 10 * time.Second, ""},
		{nil, map[string]string{"EA_REMOTE_KINDS": " a:msgpack, b:json ,c", "EA_REMOTE_TIMEOUT": "750ms"},
			[]remoteKind{{"a", remote.Msgpack}, {"b", remote.JSON}, {"c", remote.JSON}}, 750 * time.Millisecond, ""},
		{[]string{"--remote-kinds", "a.b"}, nil, nil, 0, "want comma-separated kinds"},
		{[]string{"--remote-kinds", "a:xml"}, nil, nil, 0, "want comma-separated kinds"},
		{[]string{"--remote-kinds", "a,,b"}, nil, nil, 0, "want comma-separated kinds"},
		{[]string{"--remote-kinds", "a,a:msgpack"}, nil, nil, 0, "kind a is listed twice"},
		{[]string{"--remote-timeout", "0s"}, nil, nil, 0, "want a positive duration"},
	} {
		cfg, err := parseConfig("ea-node", tc.args, envOf(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: err %v, want %q", tc.args, tc.env, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		if !reflect.DeepEqual(cfg.RemoteKinds, tc.want) || cfg.RemoteTimeout != tc.timeout {
			t.Errorf("%v %v: remote kinds %v timeout %s, want %v %s", tc.args, tc.env, cfg.RemoteKinds, cfg.RemoteTimeout, tc.want, tc.timeout)
		}
	}
}

// TestRemoteKindsNode runs a node command with no Go kind, only
// --remote-kinds, and a worker answering its requests over NATS.
func TestRemoteKindsNode(t *testing.T) {
	srv := bustest.NewServer(t)
	names, err := bus.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A JSON worker adding the payload's "by" to "n".
	if _, err := nc.QueueSubscribe(names.Logic("adder"), names.LogicQueue("adder"), func(m *nats.Msg) {
		var req struct {
			Record struct {
				Payload struct{ By int } `json:"payload"`
			} `json:"record"`
			State struct{ N int } `json:"state"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Errorf("request: %v", err)
			return
		}
		b, _ := json.Marshal(map[string]any{"state": map[string]int{"n": req.State.N + req.Record.Payload.By}})
		if err := m.Respond(b); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}

	env := func(string) string { return "" }
	var out, errOut strings.Builder
	if err := (Command{Name: "x"}).Run(context.Background(), nil, env, &out, &errOut); !errors.Is(err, ErrNoKinds) {
		t.Fatalf("no kinds at all: %v, want ErrNoKinds", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Command{Name: "remote-node"}.Run(ctx, []string{"--nats", srv.URL, "--metrics", "off", "--record-store=false",
			"--remote-kinds", "adder", "--remote-timeout", "5s"}, env, &discard{}, &discard{})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	}()
	conn := srv.Connect(t)
	c, err := actor.NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	ref := records.Ref{Kind: "adder", ID: "a1"}
	actortest.Eventually(t, time.Minute, "adder hosted", func() bool {
		_, err := c.Create(context.Background(), ref, nil)
		return err == nil
	})
	for by := 1; by <= 4; by++ {
		rec, err := records.NewJSON("add", map[string]int{"by": by})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(context.Background(), ref, rec); err != nil {
			t.Fatal(err)
		}
	}
	actortest.Eventually(t, time.Minute, "n = 10", func() bool {
		doc, err := c.State(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			N int `json:"n"`
		}
		return doc.Decode(&s) == nil && s.N == 10
	})
	if _, err := c.Terminate(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
}

// discard is an io.Writer that drops what it gets, safe for concurrent use.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
