package web

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// Bounds of the gateway's cache of the record types kinds declare.
const (
	// kindTypesTTL is how long what the nodes said of a kind's types is
	// used before they are asked again.
	kindTypesTTL = 5 * time.Second
	// kindTypesAsk bounds one question (a remote kind's node counts its
	// workers first: up to about a second).
	kindTypesAsk = 2 * time.Second
	// maxKindTypes bounds the kinds cached; past it, the oldest half goes.
	maxKindTypes = 1024
)

// kindTypes caches the record types each kind declares (the kind endpoint,
// actor.Client.Kind), so that a send asks the nodes at most once per kind
// every kindTypesTTL. A kind whose nodes cannot say (none runs, or they
// predate the endpoint) counts as declaring none, for the TTL too.
type kindTypes struct {
	mu     sync.Mutex // guards byKind
	byKind map[string]kindTypesEntry
}

type kindTypesEntry struct {
	types []string // sorted; nil: any type
	at    time.Time
}

func newKindTypes() *kindTypes { return &kindTypes{byKind: map[string]kindTypesEntry{}} }

// accepts reports whether kind takes records of type typ; when it does not,
// types are the ones it declares.
func (k *kindTypes) accepts(ctx context.Context, c *actor.Client, kind, typ string) (types []string, ok bool) {
	if typ == "" {
		typ = records.DefaultType
	}
	now := time.Now()
	k.mu.Lock()
	e, found := k.byKind[kind]
	k.mu.Unlock()
	if !found || now.Sub(e.at) > kindTypesTTL {
		ctx, cancel := context.WithTimeout(ctx, kindTypesAsk)
		info, err := c.Kind(ctx, kind, "")
		cancel()
		e = kindTypesEntry{at: now}
		if err == nil {
			e.types = info.Types
		}
		k.put(kind, e)
	}
	if len(e.types) == 0 || slices.Contains(e.types, typ) {
		return nil, true
	}
	return e.types, false
}

func (k *kindTypes) put(kind string, e kindTypesEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.byKind[kind]; !ok && len(k.byKind) >= maxKindTypes {
		cut := e.at.Add(-kindTypesTTL / 2)
		for name, old := range k.byKind {
			if old.at.Before(cut) || len(k.byKind) >= maxKindTypes {
				delete(k.byKind, name)
			}
		}
	}
	k.byKind[kind] = e
}
