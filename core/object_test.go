package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/effectors/effectors/core"
	"github.com/effectors/effectors/core/llmtest"
)

func TestCompleteJSON(t *testing.T) {
	for in, want := range map[string]string{
		``:                         "",
		`{`:                        `{}`,
		`{"ti`:                     `{}`,
		`{"title"`:                 `{}`,
		`{"title":`:                `{}`,
		`{"title":"Hel`:            `{"title":"Hel"}`,
		`{"title":"a\`:             `{"title":"a"}`,
		`{"title":"a\u00`:          `{"title":"a"}`,
		`{"title":"Hello",`:        `{"title":"Hello"}`,
		`{"title":"Hello","n":1`:   `{"title":"Hello","n":1}`,
		`{"title":"Hello","n":12.`: `{"title":"Hello","n":12}`,
		`{"tags":["a","b`:          `{"tags":["a","b"]}`,
		`{"tags":["a",`:            `{"tags":["a"]}`,
		`{"ok":tr`:                 `{}`,
		`{"ok":true,"x":{"y":[1,{`: `{"ok":true,"x":{"y":[1,{}]}}`,
		`{"done":"yes"}`:           `{"done":"yes"}`,
		`{"q":"say \"hi\" to`:      `{"q":"say \"hi\" to"}`,
	} {
		got, ok := core.CompleteJSON(in)
		if got != want || ok != (want != "") {
			t.Errorf("CompleteJSON(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

type article struct {
	Title string   `json:"title"`
	Tags  []string `json:"tags"`
	Words int      `json:"words"`
}

// Partial objects grow as the JSON streams in; the last is validated.
func TestStreamObject(t *testing.T) {
	srv := llmtest.NewServer(t)
	p := provider(t, srv)
	srv.Enqueue(llmtest.Reply{Chunks: []string{`{"title":"Stre`, `aming JSON",`, `"tags":["go",`, `"llm"],"wor`, `ds":42}`}})
	var partials []article
	var final core.ObjectDelta[article]
	for d, err := range core.StreamObject[article](t.Context(), p, core.Prompt("", "write")) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Final {
			final = d
			continue
		}
		partials = append(partials, d.Partial)
	}
	if len(partials) != 5 || partials[0].Title != "Stre" || partials[1].Title != "Streaming JSON" || len(partials[2].Tags) != 1 ||
		len(partials[3].Tags) != 2 || partials[4].Words != 42 {
		t.Fatalf("partials %+v", partials)
	}
	if !final.Final || final.Partial.Title != "Streaming JSON" || final.Partial.Words != 42 || final.Usage.Output == 0 {
		t.Fatalf("final %+v", final)
	}
	if len(srv.Requests()[0].ResponseFormat) == 0 {
		t.Fatal("no response format sent")
	}
	// An answer that does not fit ends with a schema error after its partials.
	srv.Enqueue(llmtest.Reply{Chunks: []string{`{"title":"x",`, `"words":"many"}`}})
	var last error
	n := 0
	for d, err := range core.StreamObject[article](t.Context(), p, core.Prompt("", "write")) {
		if err != nil {
			last = err
			continue
		}
		if !d.Final {
			n++
		}
	}
	var se *core.SchemaError
	if !errors.Is(last, core.ErrSchema) || !errors.As(last, &se) || !strings.Contains(se.Answer, "many") || n == 0 {
		t.Fatalf("err %v after %d partials", last, n)
	}
}
