package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/effectors/effectors/internal/codec"
	"github.com/effectors/effectors/supervisor"
	"github.com/nats-io/nats.go/jetstream"
)

func cmdOrch() *command {
	return &command{
		name:  "orch",
		short: "start, inspect, give input to and cancel orchestrations",
		long: `Drive orchestrations through the orchestration API (<prefix>.orch.*) that
ea-supervisor serves:

  ea orch start demo '{"text":"hello world"}'   prints the new orchestration's id
  ea orch status <id>                           status, step, what it waits for, results
  ea orch input <id> '{"note":"from me"}'       input for an orchestration WAITING for it
  ea orch cancel <id>
  ea orch ls --status WAITING                   orchestrations, newest first`,
		sub: []*command{cmdOrchStart(), cmdOrchStatus(), cmdOrchInput(), cmdOrchCancel(), cmdOrchLs()},
	}
}

func cmdOrchStart() *command {
	var wait bool
	return &command{
		name: "start", args: "<name> [input-json|-]",
		short: "start an orchestration",
		long: `Start the orchestration definition <name> with the given input (JSON, or stdin
with "-") and print its id. --wait waits until it is no longer RUNNING (WAITING
for input, or final) and prints its status; when it ended FAILED, ea says
so with its error on stderr and exits with status 8.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&wait, "wait", false, "wait until it waits for input or finishes, then print its status")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 2); err != nil {
				return err
			}
			input, err := a.jsonArg(args, 1, "the input", false)
			if err != nil {
				return err
			}
			c, err := a.supervisorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			var in any
			if input != nil {
				in = input
			}
			id, err := c.Start(cctx, args[0], in)
			if err != nil {
				return err
			}
			if !wait {
				if a.g.json {
					return a.printJSON(supervisor.StartReply{ID: id})
				}
				_, err := fmt.Fprintln(a.stdout, id)
				return err
			}
			o, err := a.awaitSettled(ctx, c, id)
			if err != nil {
				return err
			}
			if err := a.printOrch(o); err != nil {
				return err
			}
			if o.Status == supervisor.StatusFailed {
				return &orchFailedError{o: o}
			}
			return nil
		},
	}
}

// awaitSettled polls an orchestration until it is not RUNNING.
func (a *app) awaitSettled(ctx context.Context, c *supervisor.Client, id string) (supervisor.Orchestration, error) {
	ctx, cancel := a.call(ctx)
	defer cancel()
	for {
		o, err := c.Status(ctx, id)
		if err != nil {
			return o, err
		}
		if o.Status != supervisor.StatusRunning {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, fmt.Errorf("orchestration %s still RUNNING after %v: %w", id, a.g.timeout, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *app) orchID(args []string) error {
	if err := a.nargs(args, 1, -1); err != nil {
		return err
	}
	if strings.TrimSpace(args[0]) == "" {
		return usagef(a.fs.Name(), "needs an orchestration id")
	}
	return nil
}

func cmdOrchStatus() *command {
	return &command{
		name: "status", args: "<id>",
		short: "print an orchestration's status",
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.orchID(args); err != nil {
				return err
			}
			if err := a.nargs(args, 1, 1); err != nil {
				return err
			}
			c, err := a.supervisorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			o, err := c.Status(cctx, args[0])
			if err != nil {
				return err
			}
			return a.printOrch(o)
		},
	}
}

func (a *app) printOrch(o supervisor.Orchestration) error {
	if a.g.json {
		return a.printJSON(o)
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%s\n", o.ID)
	fmt.Fprintf(w, "name\t%s\n", o.Name)
	fmt.Fprintf(w, "status\t%s\n", o.Status)
	fmt.Fprintf(w, "step\t%s\n", o.Step)
	if o.WaitingFor != "" {
		fmt.Fprintf(w, "waiting for\t%s\n", o.WaitingFor)
	}
	if len(o.Prompt) > 0 {
		fmt.Fprintf(w, "prompt\t%s\n", compactJSON(o.Prompt))
	}
	for _, t := range o.Tasks {
		fmt.Fprintf(w, "task\t%s %s to %s (step %s, sent %s)\n", t.ID, t.Type, t.Worker, t.Step, ago(a.now(), t.Sent))
	}
	fmt.Fprintf(w, "results\t%s\n", compactJSON(o.Results))
	if o.Error != "" {
		fmt.Fprintf(w, "error\t%s\n", o.Error)
	}
	fmt.Fprintf(w, "steps\t%d\n", o.Steps)
	if !o.Created.IsZero() {
		fmt.Fprintf(w, "created\t%s\n", o.Created.Local().Format(time.RFC3339))
		fmt.Fprintf(w, "updated\t%s\n", o.Updated.Local().Format(time.RFC3339))
	}
	return w.Flush()
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

func cmdOrchInput() *command {
	return &command{
		name: "input", args: "<id> [input-json|-]",
		short: "give input to an orchestration waiting for it",
		long: `Give input (JSON, or stdin with "-") to an orchestration that is WAITING for
it, and print its status after. Exit status 5 when it is not waiting.`,
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.orchID(args); err != nil {
				return err
			}
			if err := a.nargs(args, 1, 2); err != nil {
				return err
			}
			input, err := a.jsonArg(args, 1, "the input", false)
			if err != nil {
				return err
			}
			c, err := a.supervisorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			var in any
			if input != nil {
				in = input
			}
			if _, err := c.Input(cctx, args[0], in); err != nil {
				return err
			}
			o, err := c.Status(cctx, args[0])
			if err != nil {
				return err
			}
			return a.printOrch(o)
		},
	}
}

func cmdOrchCancel() *command {
	return &command{
		name: "cancel", args: "<id>",
		short: "cancel an orchestration",
		long:  `Cancel an orchestration: it becomes CANCELLED and its outstanding tasks get a cancel record. Exit status 5 when it already finished.`,
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.orchID(args); err != nil {
				return err
			}
			if err := a.nargs(args, 1, 1); err != nil {
				return err
			}
			c, err := a.supervisorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			if err := c.Cancel(cctx, args[0]); err != nil {
				return err
			}
			if a.g.json {
				return a.printJSON(map[string]any{"id": args[0], "status": supervisor.StatusCancelled})
			}
			_, err = fmt.Fprintf(a.stdout, "cancelled %s\n", args[0])
			return err
		},
	}
}

// orchSummary is what ea orch ls reads of an orchestration's record in the
// orchestration bucket (a msgpack map, fields named as in the status reply).
type orchSummary struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Status     supervisor.Status `json:"status"`
	Step       string            `json:"step"`
	WaitingFor string            `json:"waiting_for,omitempty"`
	Error      string            `json:"error,omitempty"`
	Steps      int               `json:"steps"`
	Created    time.Time         `json:"created"`
	Updated    time.Time         `json:"updated"`
}

func cmdOrchLs() *command {
	var o struct {
		status, name string
		limit        int
	}
	return &command{
		name: "ls", short: "list orchestrations, newest first",
		long: `List orchestrations with name, status, step and what they wait for, newest
first, reading the orchestration bucket (<prefix>_orch) directly: every key
is read, so on a large deployment filter with --status / --name and bound
the output with --limit.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.status, "status", "", "only this status: RUNNING, WAITING, COMPLETED, FAILED or CANCELLED")
			fs.StringVar(&o.name, "name", "", "only orchestrations of this definition")
			fs.IntVar(&o.limit, "limit", 100, "print at most this many (0: all)")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 0); err != nil {
				return err
			}
			st := supervisor.Status(strings.ToUpper(o.status))
			switch st {
			case "", supervisor.StatusRunning, supervisor.StatusWaiting, supervisor.StatusCompleted, supervisor.StatusFailed, supervisor.StatusCancelled:
			default:
				return usagef(a.fs.Name(), "--status %q: want RUNNING, WAITING, COMPLETED, FAILED or CANCELLED", o.status)
			}
			if o.limit < 0 {
				return usagef(a.fs.Name(), "--limit %d: want 0 (all) or more", o.limit)
			}
			conn, err := a.connect(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, 6*a.g.timeout)
			defer cancel()
			bucket, err := conn.JetStream().KeyValue(cctx, conn.Names().OrchBucket())
			if err != nil {
				return withCode(exitUnavailable, fmt.Errorf("orchestration bucket %s: %w (was the deployment provisioned?)", conn.Names().OrchBucket(), err))
			}
			lister, err := bucket.ListKeys(cctx)
			if err != nil {
				return fmt.Errorf("list orchestrations: %w", err)
			}
			var list []orchSummary
			for key := range lister.Keys() {
				e, err := bucket.Get(cctx, key)
				if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
					continue
				}
				if err != nil {
					return fmt.Errorf("read orchestration %s: %w", key, err)
				}
				var s orchSummary
				if codec.Unmarshal(e.Value(), &s) != nil || s.ID != key || s.Status == "" {
					continue // not an orchestration record (a graph checkpoint, say)
				}
				if (st != "" && s.Status != st) || (o.name != "" && s.Name != o.name) {
					continue
				}
				list = append(list, s)
			}
			if err := cctx.Err(); err != nil {
				return fmt.Errorf("list orchestrations: %w", err)
			}
			sort.Slice(list, func(i, j int) bool { return list[i].Created.After(list[j].Created) })
			if o.limit > 0 && len(list) > o.limit {
				list = list[:o.limit]
			}
			if a.g.json {
				for _, s := range list {
					if err := a.printJSON(s); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tSTEP\tWAITING FOR\tUPDATED")
			for _, s := range list {
				wf := s.WaitingFor
				if wf == "" {
					wf = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Name, s.Status, s.Step, wf, ago(a.now(), s.Updated))
			}
			return tw.Flush()
		},
	}
}
