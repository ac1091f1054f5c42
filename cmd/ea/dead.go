package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/internal/deadletter"
	"github.com/effectors/effectors/records"
	"github.com/nats-io/nats.go/jetstream"
)

func cmdDead() *command {
	return &command{
		name:  "dead",
		short: "act on dead letters: replay one",
		long: `Act on dead letters (ea tail dead lists them):

  ea dead replay <record-id>               send the dead-lettered record again
  ea dead replay --seq 42                  the dead letter at #42 (the # column of ea tail dead)
  ea dead replay <record-id> --effector counter/c1    look only among one effector's`,
		sub: []*command{cmdDeadReplay()},
	}
}

func cmdDeadReplay() *command {
	var o struct {
		seq      uint64
		effector string
		wait     bool
	}
	return &command{
		name: "replay", args: "[<record-id>]",
		short: "send a dead letter's record again, as a new record",
		long: `Send the record a dead letter holds to its original mailbox again, as a new
record: a new id, the time now, and EA-Cause the original record's id (the
original's own EA-Cause is not kept); type, process, owner, reply, priority,
sender, content type and payload as they were. The dead letter stays.

Give the original record's id, or the dead letter's (dead:<id>, the id=
column of ea tail dead), or --seq with the dead letter's sequence (its #
column). Finding a dead letter by id
reads the dead letters from the start: --effector <kind> or <kind>/<id>
narrows that down on a large deployment. When several dead letters hold that
id, the newest is replayed. A dead letter that holds only part of its record
(EA-Truncated) is replayed from the original in its stream, if the stream
still holds it. --wait waits as ea send --wait does.

Reads the dead letter stream directly: the client role of deploy/nats may not
(permission denied, exit status 1).`,
		flags: func(fs *flag.FlagSet) {
			fs.Uint64Var(&o.seq, "seq", 0, "the dead letter at this sequence of the dead letter stream (the # column of ea tail dead)")
			fs.StringVar(&o.effector, "effector", "", "look for the id only among the dead letters of this <kind> or <kind>/<id>")
			fs.BoolVar(&o.wait, "wait", false, "wait until the effector processed the new record, as ea send --wait")
		},
		run: func(ctx context.Context, a *app, args []string) error {
			if err := a.nargs(args, 0, 1); err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if (id == "") == (o.seq == 0) {
				return usagef(a.fs.Name(), "give the dead-lettered record's id or --seq (one of them)")
			}
			conn, err := a.connect(ctx)
			if err != nil {
				return err
			}
			// The dead letter names the stored mailbox subject, which
			// carries the partition: read the deployment's count (ea does
			// not provision; replaying needs a user that reads EA_DEAD,
			// who may read EA_MBOX's info too).
			conn.Adopt(ctx)
			n := conn.Names()
			filter := n.DeadLetters()
			if o.effector != "" {
				if o.seq != 0 {
					return usagef(a.fs.Name(), "--effector narrows a search by id; --seq needs none")
				}
				if strings.Contains(o.effector, "/") {
					ref, err := a.ref(o.effector)
					if err != nil {
						return err
					}
					filter = n.Dead(ref)
				} else {
					if err := records.ValidateKind(o.effector); err != nil {
						return usagef(a.fs.Name(), "--effector %q: %v", o.effector, err)
					}
					filter = n.Dead(records.Ref{Kind: o.effector, ID: "*"})
				}
			}
			cctx, cancel := a.call(ctx)
			defer cancel()
			var dm deadMsg
			if o.seq != 0 {
				m, err := getMsg(cctx, conn, n.DeadStream(), o.seq, "")
				if errors.Is(err, errNoMsg) {
					return withCode(exitNotFound, fmt.Errorf("no dead letter at %s #%d (ea tail dead lists them)", n.DeadStream(), o.seq))
				}
				if err != nil {
					return err
				}
				dm = deadMsg{subject: m.Subject, header: m.Header, data: m.Data, seq: m.Seq, stored: m.Time}
			} else if dm, err = findDead(cctx, conn, filter, id); err != nil {
				return err
			}
			rec, ref, err := replayOf(cctx, conn, dm)
			if err != nil {
				return err
			}
			c, err := a.actorClient(ctx)
			if err != nil {
				return err
			}
			var dead deadCheck
			if o.wait {
				if dead, err = a.deadCheckFor(cctx, c, ref); err != nil {
					return err
				}
			}
			sent, err := c.Send(cctx, ref, rec)
			dead = dead.sent(sent)
			if errors.Is(err, actor.ErrNotFound) {
				return missing(cctx, c, "replay to", ref)
			}
			if err != nil {
				return fmt.Errorf("replay dead letter #%d: %w", dm.seq, err)
			}
			d := deadOf(dm)
			if !o.wait {
				if a.g.json {
					return a.printJSON(map[string]any{"id": sent.ID, "seq": sent.Seq, "subject": sent.Subject, "type": sent.Type, "cause": sent.Cause, "dead_seq": d.DeadSeq})
				}
				_, err := fmt.Fprintf(a.stdout, "replayed dead letter #%d (reason %s) to %s: id %s, seq %d, cause %s\n", d.DeadSeq, d.Reason, ref, sent.ID, sent.Seq, sent.Cause)
				return err
			}
			doc, err := c.StateAt(cctx, ref, sent.Seq)
			if err != nil {
				return fmt.Errorf("record %s replayed (seq %d), but waiting for %s to process it: %w", sent.ID, sent.Seq, ref, err)
			}
			return a.sentOutcome(cctx, ref, sent, doc, dead)
		},
	}
}

// findDead returns the newest dead letter on filter that holds the record
// with id, reading them all through an ordered consumer.
func findDead(ctx context.Context, conn *bus.Conn, filter, id string) (deadMsg, error) {
	n := conn.Names()
	want := id
	if !strings.HasPrefix(id, deadIDPrefix) {
		want = records.DeadID(id)
	}
	notFound := withCode(exitNotFound, fmt.Errorf("no dead letter of record %s in %s (ea tail dead lists them, with their ids)", id, n.DeadStream()))
	cons, err := conn.JetStream().OrderedConsumer(ctx, n.DeadStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return deadMsg{}, fmt.Errorf("dead letters (stream %s): %w", n.DeadStream(), err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return deadMsg{}, fmt.Errorf("dead letters: %w", err)
	}
	if info.NumPending == 0 {
		return deadMsg{}, notFound
	}
	it, err := cons.Messages()
	if err != nil {
		return deadMsg{}, fmt.Errorf("dead letters: %w", err)
	}
	defer it.Stop()
	var found *deadMsg
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return deadMsg{}, fmt.Errorf("look for the dead letter of %s: %w", id, err)
		}
		if msg.Headers().Get(records.HeaderID) == want {
			m := deadMsgOf(msg)
			found = &m
		}
		if meta, err := msg.Metadata(); err != nil || meta.NumPending == 0 {
			break
		}
	}
	if found == nil {
		return deadMsg{}, notFound
	}
	return *found, nil
}

// replayOf returns the record a dead letter holds, as a new record linked
// to it, and the effector whose mailbox it was sent to (see
// deadletter.Replay, which the gateway's dead.replay shares).
func replayOf(ctx context.Context, conn *bus.Conn, dm deadMsg) (records.Record, records.Ref, error) {
	rec, ref, err := deadletter.Replay(ctx, conn, bus.StoredMsg{Subject: dm.subject, Seq: dm.seq, Header: dm.header, Data: dm.data, Time: dm.stored})
	if errors.Is(err, deadletter.ErrInvalid) {
		err = withCode(exitUsage, err)
	}
	return rec, ref, err
}

// deadIDPrefix starts every dead letter's id (records.DeadID).
const deadIDPrefix = "dead:"
