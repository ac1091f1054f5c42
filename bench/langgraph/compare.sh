#!/usr/bin/env bash
# Runs the 10-node linear counter graph in LangGraph.js (bench.mjs) and in
# the Go engine (BenchmarkLinear10) in one go and prints time per step and
# the ratios LangGraph.js / Go.
#
#   bench/langgraph/compare.sh [invocations] [go-rounds]   (defaults 1000, 5)
#
# Needs Node.js and `npm install` in bench/langgraph (make bench-graph does it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
n=${1:-1000}
rounds=${2:-5}
if [[ ! -d node_modules/@langchain/langgraph ]]; then
	echo "bench/langgraph: run 'npm install' here first (or 'make bench-graph')" >&2
	exit 1
fi
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(go version | cut -d' ' -f3), node $(node --version), $n invocations of 10 nodes"
js=$(node bench.mjs "$n")
echo "langgraph.js: $js"
gobench=$(go test -run '^$' -bench '^Benchmark(Linear10|Subgraph|Stream)$' -benchtime "${n}x" -count "$rounds" . | grep '^Benchmark' || true)
if [[ -z $gobench ]]; then
	echo "go benchmark failed" >&2
	exit 1
fi
echo "$gobench"
GOBENCH="$gobench" JS="$js" node --input-type=module -e '
const js = JSON.parse(process.env.JS);
const go = {};
for (const line of process.env.GOBENCH.split("\n")) {
  const m = line.match(/^Benchmark(?:Linear10\/|(Subgraph\/|Stream))(\S*?)-\d+\s.*?([\d.]+) ns\/step/);
  if (m) { const k = (m[1] || "") + m[2]; (go[k] ||= []).push(Number(m[3])); continue; }
}
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const us = (ms) => (ms * 1000).toFixed(2) + " µs";
const g = Object.fromEntries(Object.entries(go).map(([k, v]) => [k, median(v) / 1e6])); // ms per step
const rows = [
  ["Go in-memory, no checkpointer", g["memory-none"], "LangGraph.js, no checkpointer", js.no_checkpointer_ms_per_step, 100],
  ["Go, MemorySaver", g["memory-saver"], "LangGraph.js, MemorySaver", js.memory_saver_ms_per_step, 0],
  ["Go, JetStream KV every step", g["kv"], "LangGraph.js, MemorySaver", js.memory_saver_ms_per_step, 5],
  ["Go, JetStream KV, one thread (pruning)", g["kv-one-thread"], "LangGraph.js, MemorySaver", js.memory_saver_ms_per_step, 5],
  ["Go, MemorySaver, async", g["memory-saver-async"], "LangGraph.js, MemorySaver, async", js.memory_saver_async_ms_per_step, 0],
  ["Go, MemorySaver, exit", g["memory-saver-exit"], "LangGraph.js, MemorySaver, exit", js.memory_saver_exit_ms_per_step, 0],
  ["Go, JetStream KV, async", g["kv-async"], "LangGraph.js, MemorySaver, async", js.memory_saver_async_ms_per_step, 5],
  ["Go, JetStream KV, exit", g["kv-exit"], "LangGraph.js, MemorySaver, exit", js.memory_saver_exit_ms_per_step, 5],
  ["Go, subgraph, no checkpointer", g["Subgraph/memory-none"], "LangGraph.js, subgraph", js.subgraph_ms_per_step, 100],
  ["Go, subgraph, MemorySaver", g["Subgraph/memory-saver"], "LangGraph.js, subgraph, MemorySaver", js.subgraph_memory_saver_ms_per_step, 0],
  ["Go, stream values+updates", g["Stream"], "LangGraph.js, stream values+updates", js.stream_ms_per_step, 100],
];
if (js.sqlite_saver_ms_per_step) rows.push(["Go, JetStream KV every step", g["kv"], "LangGraph.js, SqliteSaver", js.sqlite_saver_ms_per_step, 0]);
else console.log("SqliteSaver: " + (js.sqlite_saver_error || "not measured"));
console.log("| Go | per step | LangGraph.js | per step | ratio | target |");
console.log("| --- | ---: | --- | ---: | ---: | ---: |");
for (const [gn, gv, jn, jv, target] of rows) {
  const ratio = jv / gv;
  const t = target ? (ratio >= target ? `≥${target}× met` : `≥${target}× MISSED`) : "";
  console.log(`| ${gn} | ${us(gv)} | ${jn} | ${us(jv)} | ${ratio.toFixed(1)}× | ${t} |`);
}
'
