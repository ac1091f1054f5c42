package core_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/effectors/effectors/core"
)

// deltas is a stream of chunks, then a final response.
func deltas(chunks []string, final core.Response) func(context.Context) iter.Seq2[core.Delta, error] {
	return func(ctx context.Context) iter.Seq2[core.Delta, error] {
		return func(yield func(core.Delta, error) bool) {
			for _, c := range chunks {
				if !yield(core.Delta{Text: c}, nil) {
					return
				}
			}
			yield(core.Delta{Final: &final}, nil)
		}
	}
}

func TestCoalesceStreamGathers(t *testing.T) {
	chunks := make([]string, 1000)
	for i := range chunks {
		chunks[i] = "tok "
	}
	final := core.Response{Text: strings.Join(chunks, ""), Usage: core.Usage{Input: 3, Output: 1000}}
	for _, tc := range []struct {
		name string
		cfg  core.Coalesce
		max  int // records at most
		min  int // records at least
	}{
		// 4,000 bytes given at once: at least two records of at most 2 KiB.
		{"defaults", core.Coalesce{}, 10, 2},
		{"bytes", core.Coalesce{Delay: time.Hour, Bytes: 400}, 10, 10},
		{"off", core.NoCoalesce, 1000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			res, err := core.CoalesceStream(t.Context(), tc.cfg, deltas(chunks, final), func(s string) error {
				got = append(got, s)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Usage != final.Usage || res.Text != final.Text {
				t.Errorf("final %+v, want the stream's", res)
			}
			if strings.Join(got, "") != final.Text {
				t.Errorf("emitted text differs from the stream's")
			}
			if len(got) < tc.min || len(got) > tc.max {
				t.Errorf("%d records, want %d to %d", len(got), tc.min, tc.max)
			}
		})
	}
}

// A chunk followed by a pause goes out without waiting for the next one.
func TestCoalesceStreamFlushesOnTime(t *testing.T) {
	emitted := make(chan string, 4)
	stream := func(ctx context.Context) iter.Seq2[core.Delta, error] {
		return func(yield func(core.Delta, error) bool) {
			for _, c := range []string{"first", "second"} {
				if !yield(core.Delta{Text: c}, nil) {
					return
				}
				select { // the next chunk comes only once this one is out
				case <-emitted:
				case <-ctx.Done():
					return
				}
			}
		}
	}
	var got []string
	_, err := core.CoalesceStream(t.Context(), core.Coalesce{Delay: 10 * time.Millisecond}, stream, func(s string) error {
		got = append(got, s)
		emitted <- s
		return nil
	})
	if err != nil || strings.Join(got, "|") != "first|second" {
		t.Fatalf("records %q, err %v", got, err)
	}
}

func TestCoalesceStreamErrors(t *testing.T) {
	boom := errors.New("boom")
	t.Run("stream", func(t *testing.T) {
		stream := func(ctx context.Context) iter.Seq2[core.Delta, error] {
			return func(yield func(core.Delta, error) bool) {
				if yield(core.Delta{Text: "half"}, nil) {
					yield(core.Delta{}, boom)
				}
			}
		}
		_, err := core.CoalesceStream(t.Context(), core.Coalesce{}, stream, func(string) error { return nil })
		if !errors.Is(err, boom) {
			t.Fatalf("err %v, want the stream's", err)
		}
	})
	t.Run("emit stops the stream", func(t *testing.T) {
		stopped := make(chan struct{})
		stream := func(ctx context.Context) iter.Seq2[core.Delta, error] {
			return func(yield func(core.Delta, error) bool) {
				defer close(stopped)
				for {
					if !yield(core.Delta{Text: "x"}, nil) {
						return
					}
					if ctx.Err() != nil {
						return
					}
				}
			}
		}
		_, err := core.CoalesceStream(t.Context(), core.Coalesce{Bytes: 1}, stream, func(string) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err %v, want emit's", err)
		}
		select {
		case <-stopped: // CoalesceStream returns only once the stream ended
		default:
			t.Fatal("the stream still runs after CoalesceStream returned")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		stream := func(ctx context.Context) iter.Seq2[core.Delta, error] {
			return func(yield func(core.Delta, error) bool) {
				yield(core.Delta{Text: "x"}, nil)
				cancel()
				<-ctx.Done()
			}
		}
		_, err := core.CoalesceStream(ctx, core.Coalesce{}, stream, func(string) error { return nil })
		if !errors.Is(err, core.ErrCancelled) {
			t.Fatalf("err %v, want a cancelled error", err)
		}
	})
}
