// Package langgraph benchmarks the graph engine against LangGraph.js on the
// same graph: a linear graph of 10 nodes, each incrementing a counter,
// without a checkpointer, with an in-memory checkpointer, and (Go) with the
// JetStream KV checkpointer on an embedded server. The Go side is
// BenchmarkLinear10 in this package; the JavaScript side is bench.mjs
// (npm install here first); compare.sh runs both and prints the ratios.
// Nothing here runs in `make test`.
package langgraph
