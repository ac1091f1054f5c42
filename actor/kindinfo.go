package actor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/effectors/effectors/internal/service"
	"github.com/effectors/effectors/records"
)

// opKind is the kind endpoint, <prefix>.ctl.kind.<kind>: what a node hosting
// the kind says about it ([KindInfo]), answered like create by a node that
// hosts it.
const opKind = "kind"

// MaxTypes is the most record types a kind may declare ([Kind.Types]).
const MaxTypes = 64

// MaxWaiting is the most effectors a [RemoteInfo] lists; the rest are
// counted in [RemoteInfo.WaitingMore].
const MaxWaiting = 100

// KindRequest is the JSON body of a kind request. Both fields are optional.
type KindRequest struct {
	// ID, when set, narrows [RemoteInfo.Waiting] to effector <kind>/<id>.
	ID string `json:"id,omitempty"`
}

// KindInfo is what a node hosting a kind says about it: the JSON reply of
// the kind endpoint <prefix>.ctl.kind.<kind> ([Client.Kind]). It is status
// information, not stored anywhere: the state documents are unchanged.
type KindInfo struct {
	Kind string `json:"kind"`
	// Types are the record types the kind handles ([Kind.Types]), sorted;
	// empty: the kind does not say, and takes any type.
	Types []string `json:"types,omitempty"`
	// Remote is set for a kind whose logic runs in worker processes
	// (package remote): whether workers answer, and who waits for them.
	Remote *RemoteInfo `json:"remote,omitempty"`
}

// Accepts reports whether the kind handles records of type typ ("" is
// records.DefaultType): always when it declares no types.
func (k KindInfo) Accepts(typ string) bool {
	if typ == "" {
		typ = records.DefaultType
	}
	return len(k.Types) == 0 || slices.Contains(k.Types, typ)
}

// RemoteInfo is the condition of a remote kind's workers, as the node
// answering the kind request sees it.
type RemoteInfo struct {
	// Subject is where the kind's requests go: <prefix>.logic.<kind>.
	Subject string `json:"subject"`
	// Answering is false when NATS answers "no responders" on Subject: no
	// worker is subscribed.
	Answering bool `json:"answering"`
	// Workers is how many workers announced themselves when asked
	// (docs/polyglot.md, "Discovery"); workers that do not announce
	// themselves are not counted, so Answering may be true with 0.
	Workers int `json:"workers"`
	// Down is when this node's requests began to find no worker or to go
	// unanswered; zero while they are answered.
	Down time.Time `json:"down,omitzero"`
	// Problem says what went wrong with the latest request that failed so.
	Problem string `json:"problem,omitempty"`
	// Waiting are the effectors whose record in hand waits for a worker on
	// this node (their latest request found none or timed out), at most
	// [MaxWaiting]; WaitingMore counts the rest.
	Waiting     []Waiting `json:"waiting,omitempty"`
	WaitingMore int       `json:"waiting_more,omitempty"`
}

// Waiting is an effector whose record waits for a remote kind's worker.
type Waiting struct {
	Effector string `json:"effector"`
	// Record is the id of the record in hand.
	Record string `json:"record"`
	// Since is when the first request about it failed.
	Since time.Time `json:"since"`
	// Attempts counts the requests about it that failed so.
	Attempts int `json:"attempts"`
	// Reason is the latest failure.
	Reason string `json:"reason"`
}

// Describe, when set on a [Kind], adds what the kind knows of its own
// condition to the kind endpoint's answer: a remote kind sets info.Remote,
// and the types its workers announce if the Kind declares none. id is
// [KindRequest.ID]. It must return quickly and honour ctx.
type Describe func(ctx context.Context, id string, info *KindInfo)

// checkTypes validates declared record types and returns them sorted.
func checkTypes(kind string, types []string) ([]string, error) {
	if len(types) > MaxTypes {
		return nil, invalidf("kind %s: %d Types exceed %d", kind, len(types), MaxTypes)
	}
	out := slices.Clone(types)
	for _, t := range out {
		if err := records.ValidateType(t); err != nil {
			return nil, invalidf("kind %s: Types: %v", kind, err)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// kindControl answers a kind request for a hosted kind.
func (n *Node) kindControl(ctx context.Context, kind string, data []byte) ([]byte, error) {
	var req KindRequest
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := decodeRequest(data, &req, `{"id": "c1"} or {}`); err != nil {
			return nil, err
		}
	}
	if req.ID != "" {
		if _, err := checkedRef(kind, req.ID); err != nil {
			return nil, err
		}
	}
	n.mu.Lock()
	s, ok := n.kinds[kind]
	n.mu.Unlock()
	if !ok {
		return nil, failf(ErrNoHost, "this node does not host kind %s", service.Quote(kind))
	}
	info := KindInfo{Kind: kind, Types: slices.Clone(s.types)}
	if s.describe != nil {
		s.describe(ctx, req.ID, &info)
	}
	return json.Marshal(info)
}

// Kind asks a node hosting kind what it says about it ([KindInfo]): the
// record types it takes and, for a remote kind, its workers and the
// effectors waiting for them (narrowed to id when not empty). Errors:
// ErrNoHost when no node hosts the kind, ErrInvalid for a bad kind or id,
// [ErrNoKindEndpoint] when the nodes predate the kind endpoint.
func (c *Client) Kind(ctx context.Context, kind, id string) (KindInfo, error) {
	if err := records.ValidateKind(kind); err != nil {
		return KindInfo{}, fmt.Errorf("kind %s: %w: %w", kind, ErrInvalid, err)
	}
	body, err := json.Marshal(KindRequest{ID: id})
	if err != nil {
		return KindInfo{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	msg, err := c.conn.NATS().RequestWithContext(ctx, c.names.Control(opKind, kind), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return KindInfo{}, fmt.Errorf("kind %s: %w: no node answers %s (no node is running, or the nodes predate it)", kind, ErrNoKindEndpoint, c.names.Control(opKind, kind))
	}
	if err != nil {
		return KindInfo{}, fmt.Errorf("kind %s: %w", kind, err)
	}
	if se := service.ErrorOf(msg); se != nil {
		return KindInfo{}, fmt.Errorf("kind %s: %w", kind, &ControlError{Code: se.Code, Reason: se.Reason, Message: se.Message})
	}
	var info KindInfo
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return KindInfo{}, fmt.Errorf("kind %s: bad reply: %w", kind, err)
	}
	return info, nil
}
