package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/effectors/effectors/core"
)

func ExampleRun() {
	ps := core.NewPipelines()
	upper, _ := core.NewPipeline("upper", "upper-cases text", func(_ context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	})
	_ = ps.Register(upper)
	svc := &core.Services{Pipelines: ps}
	scope := svc.Scope("writer", core.Permissions{Services: []core.Service{core.ServicePipelines}, Pipelines: []string{"upper"}})

	out, err := core.Run(context.Background(), scope, func(ctx context.Context) (string, error) {
		s, err := core.From(ctx)
		if err != nil {
			return "", err
		}
		var shout string
		err = s.Pipeline(ctx, "upper", "hello", &shout)
		return shout, err
	})
	fmt.Println(out, err)

	// Not permitted: a typed error before anything runs.
	_, err = core.Run(context.Background(), scope, func(ctx context.Context) (string, error) {
		s, _ := core.From(ctx)
		return "", s.Pipeline(ctx, "delete_everything", nil, nil)
	})
	fmt.Println(core.CodeOf(err), errors.Is(err, core.ErrPermission))

	// A timeout.
	_, err = core.Run(context.Background(), scope, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, core.Timeout(10*time.Millisecond))
	fmt.Println(core.CodeOf(err))
	// Output:
	// HELLO <nil>
	// permission true
	// timeout
}
