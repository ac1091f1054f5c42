// Package langgraph benchmarks the graph engine against LangGraph.js on the
// same graph: a linear graph of 10 nodes, each incrementing a counter,
// without a checkpointer, with an in-memory checkpointer, and (Go) with the
// JetStream KV checkpointer on an embedded server. The Go side is
// BenchmarkLinear10 in this package; the JavaScript side is bench.mjs
// (npm install here first); compare.sh runs both and prints the ratios.
//
// parity.mjs prints what LangGraph.js does where the engine's behaviour was
// checked against it (a shared-state subgraph's output, the order of a
// step's writes, the values stream, checkpoint steps); graph/parity_test.go
// encodes that output. Run it with `node parity.mjs` (or `npm run parity`).
// Nothing here runs in `make test`.
package langgraph
