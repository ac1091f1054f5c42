package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// kindAsk bounds one question to the kind endpoint (a remote kind's node
// counts its workers: up to half a second).
const kindAsk = 3 * time.Second

// askKind asks what a node hosting kind says about it (actor.Client.Kind),
// narrowed to effector id when set, within kindAsk of ctx (which may have
// run out: --wait's timeout). ok is false when nothing could be learnt (no
// node, older nodes): callers then say what they said before.
func askKind(ctx context.Context, c *actor.Client, kind, id string) (actor.KindInfo, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kindAsk)
	defer cancel()
	info, err := c.Kind(ctx, kind, id)
	return info, err == nil
}

// typeRefusedError: a record of a type its kind does not declare (exit
// status 2, the caller's input); --any-type sends it anyway.
type typeRefusedError struct {
	ref   records.Ref
	typ   string
	types []string
}

func (e *typeRefusedError) Error() string {
	fix := "--type " + e.types[0]
	return fmt.Sprintf("kind %s handles record types %s, not %q: nothing was sent; give the type with %s (or send anyway with --any-type)",
		e.ref.Kind, strings.Join(e.types, ", "), e.typ, fix)
}

// checkType refuses to send a record of type typ to ref when its kind
// declares the types it handles and typ is not one of them. A kind that
// declares none, or nodes that cannot say, let it through.
func checkType(ctx context.Context, c *actor.Client, ref records.Ref, typ string) error {
	if typ == "" {
		typ = records.DefaultType
	}
	info, ok := askKind(ctx, c, ref.Kind, "")
	if !ok || info.Accepts(typ) {
		return nil
	}
	return &typeRefusedError{ref: ref, typ: typ, types: info.Types}
}

// stallCause says why ref's record waits, when its kind is a remote kind
// whose workers do not answer; "" when that is not the reason (or nothing
// could be learnt).
func stallCause(ctx context.Context, c *actor.Client, ref records.Ref) string {
	info, ok := askKind(ctx, c, ref.Kind, ref.ID)
	if !ok || info.Remote == nil {
		return ""
	}
	return remoteCause(ref, info.Remote)
}

// remoteCause says what ref waits for, from its kind's remote info; "" when
// it waits for nothing the info shows.
func remoteCause(ref records.Ref, r *actor.RemoteInfo) string {
	var w *actor.Waiting
	for i := range r.Waiting {
		if r.Waiting[i].Effector == ref.String() {
			w = &r.Waiting[i]
		}
	}
	switch {
	case w != nil && !r.Answering:
		return fmt.Sprintf("no worker of remote kind %s answers on %s (record %s waits since %s, %d attempts): start a worker of kind %s (docs/polyglot.md)",
			ref.Kind, r.Subject, w.Record, w.Since.Local().Format(time.TimeOnly), w.Attempts, ref.Kind)
	case w != nil:
		return fmt.Sprintf("record %s waits for a worker of remote kind %s on %s since %s (%d attempts failed; last: %s)",
			w.Record, ref.Kind, r.Subject, w.Since.Local().Format(time.TimeOnly), w.Attempts, w.Reason)
	case !r.Answering:
		return fmt.Sprintf("no worker of remote kind %s answers on %s: start a worker of kind %s (docs/polyglot.md)", ref.Kind, r.Subject, ref.Kind)
	}
	return ""
}

// workersText is the WORKERS column of ea kinds.
func workersText(info actor.KindInfo, ok bool) string {
	switch {
	case !ok:
		return "?"
	case info.Remote == nil:
		return "-" // logic in the node
	case info.Remote.Workers > 0:
		return fmt.Sprintf("%d", info.Remote.Workers)
	case info.Remote.Answering:
		return "answering (not announced)"
	}
	return "0: none answers " + info.Remote.Subject
}

// typesText is the TYPES column of ea kinds.
func typesText(info actor.KindInfo, ok bool) string {
	switch {
	case !ok:
		return "?"
	case len(info.Types) == 0:
		return "any"
	}
	return strings.Join(info.Types, ",")
}
