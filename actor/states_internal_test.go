package actor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/effectors/effectors/bus/bustest"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStatesRefuseMismatch: the runtime's state store never writes a
// document under another effector's key.
func TestStatesRefuseMismatch(t *testing.T) {
	t.Parallel()
	conn := bustest.NewServer(t).Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bucket, err := conn.StateBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := newStates([]jetstream.KeyValue{bucket}, conn.Names())
	good := Document{Kind: "counter", ID: "a", Status: StatusIdle}
	rev, err := st.Create(ctx, "counter.a", good)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Document{{Kind: "counter", ID: "b"}, {Kind: "other", ID: "a"}, {}} {
		if _, err := st.Create(ctx, "counter.x", bad); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("Create of %s under counter.x: %v, want ErrStateMismatch", bad.Ref(), err)
		}
		if _, err := st.Update(ctx, "counter.a", bad, rev); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("Update of %s under counter.a: %v, want ErrStateMismatch", bad.Ref(), err)
		}
		if _, err := st.Modify(ctx, "counter.a", func(Document) (Document, error) { return bad, nil }); !errors.Is(err, ErrStateMismatch) {
			t.Errorf("Modify to %s under counter.a: %v, want ErrStateMismatch", bad.Ref(), err)
		}
	}
	if _, err := st.Get(ctx, "counter.x"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("counter.x: %v, want not found (nothing written)", err)
	}
	ent, err := st.Get(ctx, "counter.a")
	if err != nil || ent.Revision != rev || ent.Value.Ref() != good.Ref() {
		t.Errorf("counter.a: %+v %v, want revision %d unchanged", ent, err, rev)
	}
}
