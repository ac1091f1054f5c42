package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/effectors/effectors/actor"
)

// exitDiffers: ea replay found the replayed state different from the
// stored one.
const exitDiffers = 7

// errDiffers is the error of a replay that differs.
var errDiffers = errors.New("the replayed state differs from the stored state")

func cmdReplay() *command {
	var from string
	return &command{
		name: "replay", args: "<kind>/<id>",
		short: "rebuild an effector's state from its record log and compare",
		long: `Replay <kind>/<id>: a node hosting the kind reads the effector's mailbox
records up to its state document's seq, applies the kind's logic to each from
the state it was created with (records the live run dead-lettered are
skipped), publishes nothing, and compares the result with the stored state.
Prints the counts and, when they differ, the first difference. Exit status 7
when the states differ, 3 when the effector does not exist, 4 when no node
hosts the kind. --from gives the state to start from (JSON) when the effector
was created with a state of its own that its document's history no longer
shows ("from initial" in the output). Logic that reads the clock or calls
other services does not replay; see actor.Node.Replay for the limits.
A long log may need a longer --timeout.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&from, "from", "", "state to start from, as JSON (default: the state it was created with)")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 1, 1); err != nil {
				return err
			}
			ref, err := a.ref(args[0])
			if err != nil {
				return err
			}
			var opts []actor.ReplayOption
			if from != "" {
				if !json.Valid([]byte(from)) {
					return usagef(a.fs.Name(), "--from %q: not valid JSON", from)
				}
				opts = append(opts, actor.ReplayFrom(json.RawMessage(from)))
			}
			c, err := a.actorClient(ctx)
			if err != nil {
				return err
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			rep, err := c.Replay(cctx, ref, opts...)
			if err != nil {
				return hostless("replay", ref, err)
			}
			if err := a.printReplay(rep); err != nil {
				return err
			}
			if !rep.Equal {
				return withCode(exitDiffers, fmt.Errorf("replay %s: %w: %s", ref, errDiffers, rep.Difference))
			}
			return nil
		},
	}
}

func (a *app) printReplay(rep actor.ReplayReport) error {
	if a.g.json {
		return a.printJSON(rep)
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "effector\t%s/%s\n", rep.Kind, rep.ID)
	fmt.Fprintf(w, "seq\t%d\n", rep.Seq)
	fmt.Fprintf(w, "from\t%s\n", rep.From)
	fmt.Fprintf(w, "applied\t%d\n", rep.Applied)
	fmt.Fprintf(w, "skipped\t%d (dead letters)\n", rep.Skipped)
	if rep.Truncated {
		fmt.Fprintf(w, "truncated\tyes: the mailbox stream no longer starts at sequence 1\n")
	}
	if rep.Equal {
		fmt.Fprintf(w, "result\tequal\n")
		fmt.Fprintf(w, "state\t%s\n", rep.Stored)
		return w.Flush()
	}
	fmt.Fprintf(w, "result\tDIFFERENT\n")
	fmt.Fprintf(w, "difference\t%s\n", rep.Difference)
	if rep.Failure != "" {
		fmt.Fprintf(w, "failed\trecord %d: %s\n", rep.FailedSeq, rep.Failure)
	}
	fmt.Fprintf(w, "stored\t%s\n", rep.Stored)
	fmt.Fprintf(w, "replayed\t%s\n", rep.Replayed)
	return w.Flush()
}
