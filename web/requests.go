package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
	"github.com/effectors/effectors/store"
	"github.com/effectors/effectors/supervisor"
)

// Request frames' bodies.
type (
	effectorRequest struct {
		Type     string          `json:"type"`
		Req      string          `json:"req"`
		Effector string          `json:"effector"`
		State    json.RawMessage `json:"state,omitempty"` // create only
		// Owner (create only): an admin creates for this owner; a user may
		// name only itself. Empty: the connection's identity.
		Owner string `json:"owner,omitempty"`
	}
	effectorsRequest struct {
		Type   string `json:"type"`
		Req    string `json:"req"`
		Kind   string `json:"kind"`
		Status string `json:"status,omitempty"`
		Owner  string `json:"owner,omitempty"`
		Limit  int    `json:"limit,omitempty"`
		Cursor string `json:"cursor,omitempty"`
	}
	queryRequest struct {
		Type  string             `json:"type"`
		Req   string             `json:"req"`
		Query store.QueryRequest `json:"query"`
	}
	idRequest struct {
		Type string `json:"type"`
		Req  string `json:"req"`
		ID   string `json:"id"`
	}
	orchRequest struct {
		Type  string          `json:"type"`
		Req   string          `json:"req"`
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
		Owner string          `json:"owner,omitempty"` // orch.start only
	}
)

// request answers a request frame with a result or an error frame.
func (s *session) request(h head, data []byte) {
	ctx, cancel := context.WithTimeout(s.ctx, s.g.cfg.RequestTimeout)
	defer cancel()
	result, code, err := s.answer(ctx, h, data)
	if err != nil {
		if code == "" {
			code = codeOf(err)
		}
		s.errorFrame(h, code, err.Error())
		return
	}
	_ = s.send(TypeResult, resultFrame{Type: TypeResult, Req: h.Req, Result: result})
}

func (s *session) answer(ctx context.Context, h head, data []byte) (any, string, error) {
	g := s.g
	strict := func(v any) error {
		if err := decodeStrict(data, v); err != nil {
			return fmt.Errorf("%s frame: %w", h.Type, err)
		}
		return nil
	}
	ref := func(text string) (records.Ref, error) {
		r, err := records.ParseRef(text)
		if err != nil {
			return r, fmt.Errorf("effector: %w (want \"<kind>/<id>\")", err)
		}
		return r, nil
	}
	switch h.Type {
	case TypeState, TypeCreate, TypeTerminate:
		var f effectorRequest
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		r, err := ref(f.Effector)
		if err != nil {
			return nil, CodeBadRequest, err
		}
		if h.Type != TypeCreate && len(f.State) > 0 {
			return nil, CodeBadRequest, fmt.Errorf("%s frame: \"state\" is for create only", h.Type)
		}
		if h.Type != TypeCreate && f.Owner != "" {
			return nil, CodeBadRequest, fmt.Errorf("%s frame: \"owner\" is for create only", h.Type)
		}
		var doc actor.Document
		switch h.Type {
		case TypeState:
			var code string
			if doc, code, err = s.ownEffector(ctx, r); err != nil {
				return nil, code, err
			}
		case TypeCreate:
			owner, code, err := s.ownerFor(f.Owner)
			if err != nil {
				return nil, code, err
			}
			var state any
			if len(f.State) > 0 {
				state = f.State
			}
			if doc, err = g.actors.CreateOwned(ctx, r, state, owner); err != nil {
				return nil, "", err
			}
		default:
			if _, code, err := s.ownEffector(ctx, r); err != nil {
				return nil, code, err
			}
			doc, err = g.actors.Terminate(ctx, r)
		}
		if err != nil {
			return nil, "", err
		}
		return doc, "", nil
	case TypeKinds:
		var f struct {
			Type string `json:"type"`
			Req  string `json:"req"`
		}
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		kinds, err := g.store.Kinds(ctx)
		if err != nil {
			return nil, "", err
		}
		return map[string]any{"kinds": kinds}, "", nil
	case TypeEffectors:
		var f effectorsRequest
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		owner, code, err := s.listOwner(f.Owner)
		if err != nil {
			return nil, code, err
		}
		page, err := g.store.Effectors(ctx, store.EffectorQuery{Kind: f.Kind, Status: actor.Status(f.Status), Owner: owner, Limit: f.Limit, Cursor: f.Cursor})
		if err != nil {
			return nil, "", err
		}
		effs := page.Effectors
		if effs == nil {
			effs = []store.Effector{}
		}
		return map[string]any{"effectors": effs, "cursor": page.Cursor, "more": page.More}, "", nil
	case TypeQuery:
		var f queryRequest
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		q, err := f.Query.Query()
		if err != nil {
			return nil, "", err
		}
		owner, code, err := s.listOwner(q.Owner)
		if err != nil {
			return nil, code, err
		}
		q.Owner = owner
		page, err := g.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		out := store.PageJSON{Records: make([]store.RecordJSON, 0, len(page.Records)), Cursor: page.Cursor, More: page.More}
		for _, r := range page.Records {
			out.Records = append(out.Records, r.JSON())
		}
		return out, "", nil
	case TypeGet:
		var f idRequest
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		if f.ID == "" {
			return nil, CodeBadRequest, errors.New("get frame: missing \"id\" of the record")
		}
		rec, err := g.store.Get(ctx, f.ID)
		if err != nil {
			return nil, "", err
		}
		if !s.sees(rec.Owner) {
			code, err := s.forbidOwned("record "+truncate(f.ID, 64), rec.Owner, "records with its EA-Owner")
			return nil, code, err
		}
		return rec.JSON(), "", nil
	case TypeOrchStart, TypeOrchStatus, TypeOrchInput, TypeOrchCancel:
		var f orchRequest
		if err := strict(&f); err != nil {
			return nil, CodeBadRequest, err
		}
		if h.Type != TypeOrchStart && f.ID == "" {
			return nil, CodeBadRequest, fmt.Errorf("%s frame: missing \"id\" of the orchestration", h.Type)
		}
		if h.Type == TypeOrchStart && f.ID != "" {
			return nil, CodeBadRequest, errors.New("orch.start frame: \"id\" is chosen by the supervisor; leave it out")
		}
		if h.Type != TypeOrchStart && f.Owner != "" {
			return nil, CodeBadRequest, fmt.Errorf("%s frame: \"owner\" is for orch.start only", h.Type)
		}
		owner := ""
		if h.Type == TypeOrchStart {
			o, code, err := s.ownerFor(f.Owner)
			if err != nil {
				return nil, code, err
			}
			owner = o
		} else if code, err := s.ownOrchestration(ctx, f.ID); err != nil {
			return nil, code, err
		}
		var input any // nil: none (orch.start's is optional)
		if len(f.Input) > 0 {
			input = f.Input
		}
		var result any
		var err error
		switch h.Type {
		case TypeOrchStart:
			if f.Name == "" {
				return nil, CodeBadRequest, errors.New("orch.start frame: missing \"name\" of the orchestration, e.g. \"demo\"")
			}
			var id string
			if id, err = g.orch.StartOwned(ctx, f.Name, input, owner); err == nil {
				result = map[string]string{"id": id}
			}
		case TypeOrchStatus:
			var o supervisor.Orchestration
			if o, err = g.orch.Status(ctx, f.ID); err == nil {
				result = o
			}
		case TypeOrchInput:
			if input == nil {
				return nil, CodeBadRequest, errors.New("orch.input frame: missing \"input\" (any JSON value)")
			}
			var st supervisor.Status
			if st, err = g.orch.Input(ctx, f.ID, input); err == nil {
				result = map[string]string{"id": f.ID, "status": string(st)}
			}
		default:
			if err = g.orch.Cancel(ctx, f.ID); err == nil {
				result = map[string]string{"id": f.ID, "status": string(supervisor.StatusCancelled)}
			}
		}
		if err != nil {
			code, err := orchFailure(err)
			return nil, code, err
		}
		return result, "", nil
	case TypeDeadReplay, TypeDeadDiscard, TypeNodes:
		return s.consoleAnswer(ctx, h, data)
	case TypeDeadList, TypeOrchList:
		return s.listAnswer(ctx, h, data)
	}
	return nil, CodeUnknownType, fmt.Errorf("unknown frame type %q", h.Type)
}
