package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/effectors/effectors/core"
)

// A service of your own — here an HTTP endpoint; a NATS subject works the
// same with "nats": {"subject": ...} — described in a tools file becomes a
// tool of a registry, which a kind's model calls in its tool-call loop.
func ExampleParseToolFile() {
	weather := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ City string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		fmt.Fprintf(w, `{"city":%q,"forecast":"sunny"}`, in.City)
	}))
	defer weather.Close()

	tf, err := core.ParseToolFile([]byte(`{"tools": [{"name": "weather", "description": "the forecast for a city",
		"schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
		"http": {"url": "`+weather.URL+`"}}]}`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	tools, _ := tf.Build(nil, nil) // a NATS service needs the connection: tf.Build(conn.NATS(), nil)
	reg := core.NewTools()
	_ = reg.Register(tools...)
	out, err := reg.Call(context.Background(), "weather", json.RawMessage(`{"city":"Lyon"}`))
	fmt.Println(reg.Names(), out, err)
	_, err = reg.Call(context.Background(), "weather", json.RawMessage(`{}`))
	fmt.Println(core.CodeOf(err))
	// Output:
	// [weather] {"city":"Lyon","forecast":"sunny"} <nil>
	// invalid
}
