package core

import (
	"context"
	"encoding/json"
	"errors"

	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/records"
)

// NodePipelines is what one node offers: its name and its pipelines.
type NodePipelines struct {
	Node      string         `json:"node"`
	Pipelines []PipelineInfo `json:"pipelines"`
}

// names are the subjects of prefix; an invalid prefix gives names that
// match nothing the runtime serves (ServePipelines refuses it first).
func names(prefix string) bus.Names {
	n, err := bus.NewNames(prefix)
	if err != nil {
		return bus.Names{}
	}
	return n
}

func pipelineService(prefix string) string { return names(prefix).PipelineService() }

// PipelineSubject is the subject pipeline name is served on by
// ServePipelines: <prefix>.pipe.<name> ([bus.Names.Pipeline]).
func PipelineSubject(prefix, name string) string { return names(prefix).Pipeline(name) }

// ServePipelines serves every pipeline of p over NATS as a micro service named
// <prefix>_pipelines, one endpoint per pipeline on <prefix>.pipe.<name>
// (JSON in, JSON out; nodes offering the same pipeline share the calls), the
// service's metadata naming node. Any NATS client discovers them with the
// standard micro discovery ($SRV.INFO.<prefix>_pipelines, or
// `nats micro info <prefix>_pipelines`) or with [ListPipelines]. Pipelines
// registered after the call are not served. Calls run with ctx; the service
// stops when ctx ends (or when stopped).
func ServePipelines(ctx context.Context, nc *nats.Conn, prefix, node string, p *Pipelines) (micro.Service, error) {
	const op = "pipelines.serve"
	if nc == nil || p == nil {
		return nil, Errorf(CodeInvalid, op, "needs a NATS connection and a pipeline registry")
	}
	if err := records.ValidateKind(prefix); err != nil {
		return nil, Errorf(CodeInvalid, op, "prefix: %w", err)
	}
	if err := records.ValidateID(node); err != nil {
		return nil, Errorf(CodeInvalid, op, "node name: %w", err)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        pipelineService(prefix),
		Version:     "1.0.0",
		Description: "pipelines offered by effectors nodes",
		Metadata:    map[string]string{"node": node},
	})
	if err != nil {
		return nil, Errorf(CodeUnavailable, op, "add service: %w", err)
	}
	for _, info := range p.List() {
		name := info.Name
		h := micro.HandlerFunc(func(req micro.Request) {
			var out json.RawMessage
			err := p.Call(ctx, name, json.RawMessage(req.Data()), &out)
			if err != nil {
				code := "500"
				switch CodeOf(err) {
				case CodeInvalid:
					code = "400"
				case CodeNotFound:
					code = "404"
				}
				_ = req.Error(code, err.Error(), nil)
				return
			}
			_ = req.Respond(out)
		})
		if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject(PipelineSubject(prefix, name)),
			micro.WithEndpointMetadata(map[string]string{"description": info.Description})); err != nil {
			_ = svc.Stop()
			return nil, Errorf(CodeUnavailable, op, "endpoint %s: %w", name, err)
		}
	}
	// Make sure the server has the subscriptions before anyone is told the
	// pipelines are served.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		_ = svc.Stop()
		return nil, Errorf(CodeUnavailable, op, "flush: %w", err)
	}
	context.AfterFunc(ctx, func() { _ = svc.Stop() })
	return svc, nil
}

// ListPipelines asks every node serving pipelines (ServePipelines) what it
// offers and gathers the answers until ctx ends, which is the normal end:
// give it a deadline (a few hundred milliseconds on a LAN). Nodes are sorted
// by name.
func ListPipelines(ctx context.Context, nc *nats.Conn, prefix string) ([]NodePipelines, error) {
	const op = "pipelines.list"
	if nc == nil {
		return nil, Errorf(CodeInvalid, op, "needs a NATS connection")
	}
	subj, err := micro.ControlSubject(micro.InfoVerb, pipelineService(prefix), "")
	if err != nil {
		return nil, Errorf(CodeInvalid, op, "%w", err)
	}
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, Errorf(CodeUnavailable, op, "subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, Errorf(CodeUnavailable, op, "request: %w", err)
	}
	var out []NodePipelines
	for {
		select {
		case <-ctx.Done():
			slices.SortFunc(out, func(a, b NodePipelines) int {
				switch {
				case a.Node < b.Node:
					return -1
				case a.Node > b.Node:
					return 1
				}
				return 0
			})
			return out, nil
		case m := <-ch:
			var info micro.Info
			if err := json.Unmarshal(m.Data, &info); err != nil {
				continue
			}
			np := NodePipelines{Node: info.Metadata["node"], Pipelines: []PipelineInfo{}}
			for _, e := range info.Endpoints {
				np.Pipelines = append(np.Pipelines, PipelineInfo{Name: e.Name, Description: e.Metadata["description"]})
			}
			out = append(out, np)
		}
	}
}

// CallPipeline calls pipeline name on whichever node serves it (see
// ServePipelines), with in encoded as JSON, and decodes the answer into out
// (nil to discard). No node serving it is a CodeNotFound error.
func CallPipeline(ctx context.Context, nc *nats.Conn, prefix, name string, in, out any) error {
	op := "pipeline " + name
	if nc == nil {
		return Errorf(CodeInvalid, op, "needs a NATS connection")
	}
	if err := checkName(op, "pipeline", name); err != nil {
		return err
	}
	data, err := json.Marshal(in)
	if err != nil {
		return Errorf(CodeInvalid, op, "encode input: %w", err)
	}
	msg, err := nc.RequestWithContext(ctx, PipelineSubject(prefix, name), data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return Errorf(CodeNotFound, op, "no node serves pipeline %q", name)
	case err != nil && ctx.Err() != nil:
		code := CodeCancelled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = CodeTimeout
		}
		return E(code, op, err)
	case err != nil:
		return E(CodeUnavailable, op, err)
	}
	if desc := msg.Header.Get(micro.ErrorHeader); desc != "" {
		code, _ := strconv.Atoi(msg.Header.Get(micro.ErrorCodeHeader))
		switch code {
		case 400:
			return Errorf(CodeInvalid, op, "remote: %s", desc)
		case 404:
			return Errorf(CodeNotFound, op, "remote: %s", desc)
		}
		return Errorf(CodeFailed, op, "remote (%d): %s", code, desc)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return Errorf(CodeInvalid, op, "output does not fit %T: %w", out, err)
	}
	return nil
}
