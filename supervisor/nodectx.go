package supervisor

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/effectors/effectors/actor"
)

// nodeEnv is what the supervisor hands an orchestration's nodes through
// their context while it runs them.
type nodeEnv struct {
	client *actor.Client
	log    *slog.Logger
}

type nodeEnvKey struct{}

func (s *Supervisor) nodeContext(ctx context.Context, id, name string) context.Context {
	return context.WithValue(ctx, nodeEnvKey{}, nodeEnv{
		client: s.client,
		log:    s.log.With("orchestration", id, "name", name),
	})
}

// ActorClient returns the supervisor's actor.Client to a node of an
// orchestration, to create, branch or terminate effectors (worker threads:
// see package core/conversation). A node runs again from its start when it
// resumes, so what it does with the client must be idempotent: create and
// branch keep an effector that exists, terminate accepts one terminated.
func ActorClient(ctx context.Context) (*actor.Client, error) {
	env, ok := ctx.Value(nodeEnvKey{}).(nodeEnv)
	if !ok || env.client == nil {
		return nil, fmt.Errorf("%w: supervisor.ActorClient works only inside a node of an orchestration run by a supervisor", ErrInvalid)
	}
	return env.client, nil
}

// Logger returns the supervisor's logger, with the orchestration's id and
// name, to a node (slog.Default() outside a supervisor). A node may run more
// than once for one step (it runs again from its start when it resumes), so
// log decisions when they are final.
func Logger(ctx context.Context) *slog.Logger {
	if env, ok := ctx.Value(nodeEnvKey{}).(nodeEnv); ok && env.log != nil {
		return env.log
	}
	return slog.Default()
}
