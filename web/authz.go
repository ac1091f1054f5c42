package web

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/supervisor"
)

// Who sees what (docs/gateway.md, "Users"):
//
//   - an effector belongs to the owner it was created with
//     (actor.Document.Owner): a user may send to it, read and watch its
//     state, follow its boxes and dead letters, and terminate it only when
//     that is its name;
//   - a record belongs to its EA-Owner: a user sees only records carrying its
//     name, whatever topic or query brings them (the record store's owner
//     index answers its queries);
//   - an orchestration belongs to the owner it was started with;
//   - an admin sees and acts on everything.
//
// Something that exists and belongs to someone else, or to no one (admins
// only), is refused with forbidden, saying which; something that does not
// exist is not_found. Ids are one
// namespace for everyone (create answers exists for another user's id), so
// forbidden tells nothing that create would not.

// sees reports whether the connection may see something of owner.
func (s *session) sees(owner string) bool {
	id := s.identity()
	return id.Admin() || (owner != "" && owner == id.Name)
}

// forbid counts a refusal and returns its error.
func (s *session) forbid(format string, args ...any) (string, error) {
	s.g.metrics.forbidden.Inc()
	return CodeForbidden, fmt.Errorf(format, args...)
}

// forbidOwned refuses what (e.g. "effector counter/c1"), of owner, to the
// connection, which sees only its own (e.g. "its own effectors"): what
// belongs to another user, or has no owner at all (created or sent without
// one: only admins see it), said as it is.
func (s *session) forbidOwned(what, owner, own string) (string, error) {
	name := s.identity().Name
	if owner == "" {
		return s.forbid("%s has no owner (made without one: by the ea CLI, a Go client or an admin acting for no one), so only admins see it: %s sees only %s", what, name, own)
	}
	return s.forbid("%s belongs to another user: %s sees only %s", what, name, own)
}

// ownEffector returns the state document of ref when the connection may
// act on it, or an error frame's code and error.
func (s *session) ownEffector(ctx context.Context, ref records.Ref) (actor.Document, string, error) {
	doc, err := s.g.actors.State(ctx, ref)
	if err != nil {
		return doc, codeOf(err), err
	}
	if !s.sees(doc.Owner) {
		code, err := s.forbidOwned("effector "+ref.String(), doc.Owner, "its own effectors")
		return actor.Document{}, code, err
	}
	return doc, "", nil
}

// ownerFor returns the EA-Owner of what the connection sends, creates or
// starts: its own name, or asked when an admin acts for another owner. A
// user naming another owner is forbidden.
func (s *session) ownerFor(asked string) (string, string, error) {
	id := s.identity()
	if asked == "" || asked == id.Name {
		return id.Name, "", nil
	}
	if !id.Admin() {
		code, err := s.forbid("owner %q: %s acts as itself only (leave owner out: the gateway sets it from the token's identity)", truncate(asked, 64), id.Name)
		return "", code, err
	}
	if err := records.ValidateOwner(asked); err != nil {
		return "", CodeBadRequest, fmt.Errorf("owner: %w", err)
	}
	return asked, "", nil
}

// listOwner returns the owner filter of a list or query: a user's own name
// (asking for another's is forbidden); an admin's choice (empty: all).
func (s *session) listOwner(asked string) (string, string, error) {
	id := s.identity()
	if id.Admin() {
		return asked, "", nil
	}
	if asked != "" && asked != id.Name {
		code, err := s.forbid("owner %q: %s sees only its own (leave owner out)", truncate(asked, 64), id.Name)
		return "", code, err
	}
	return id.Name, "", nil
}

// ownOrchestration checks that the connection may act on orchestration id,
// reading its owner from the orchestration bucket. Admins are not checked
// (the supervisor answers not found itself).
func (s *session) ownOrchestration(ctx context.Context, id string) (string, error) {
	if s.identity().Admin() {
		return "", nil
	}
	if err := records.ValidateID(id); err != nil {
		return CodeBadRequest, fmt.Errorf("id: %w", err)
	}
	bucket, err := s.g.conn.JetStream().KeyValue(ctx, s.g.names.OrchBucket())
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return CodeNotFound, fmt.Errorf("orchestration %s: %w", id, supervisor.ErrUnknownOrchestration)
		}
		return CodeUnavailable, fmt.Errorf("orchestration %s: %w", id, err)
	}
	e, err := bucket.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return CodeNotFound, fmt.Errorf("orchestration %s: %w", id, supervisor.ErrUnknownOrchestration)
	case err != nil:
		return CodeUnavailable, fmt.Errorf("orchestration %s: %w", id, err)
	}
	o, err := supervisor.DecodeOrchestration(e.Value())
	if err != nil {
		return CodeNotFound, fmt.Errorf("orchestration %s: %w", id, supervisor.ErrUnknownOrchestration)
	}
	if !s.sees(o.Owner) {
		return s.forbidOwned("orchestration "+id, o.Owner, "its own orchestrations")
	}
	return "", nil
}
