// LangGraph.js side of the graph-engine benchmark (see compare.sh): a linear
// graph of 10 nodes, each incrementing a counter, invoked N times (default
// 1,000) without a checkpointer, with MemorySaver and, if it is installed,
// with the SQLite saver. Prints one JSON object with milliseconds per step.
//
//   node bench.mjs [invocations]
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] || 1000);
const NODES = 10;
const WARMUP = 200; // invocations per mode before timing (JIT warm-up)

const State = Annotation.Root({
  count: Annotation({ reducer: (_cur, upd) => upd, default: () => 0 }),
});

function build() {
  const g = new StateGraph(State);
  for (let i = 0; i < NODES; i++) {
    g.addNode(`n${i}`, (s) => ({ count: s.count + 1 }));
  }
  g.addEdge(START, "n0");
  for (let i = 1; i < NODES; i++) g.addEdge(`n${i - 1}`, `n${i}`);
  g.addEdge(`n${NODES - 1}`, END);
  return g;
}

async function measure(name, checkpointer, opts = {}) {
  let app = checkpointer ? build().compile({ checkpointer }) : build().compile();
  if (opts.subgraph) {
    // The 10-node graph as the only node of a parent graph.
    const parent = new StateGraph(State).addNode("child", app).addEdge(START, "child").addEdge("child", END);
    app = checkpointer ? parent.compile({ checkpointer }) : parent.compile();
  }
  const run = async (i, prefix) => {
    const config = checkpointer ? { configurable: { thread_id: `${prefix}-${i}` } } : {};
    if (opts.durability) config.durability = opts.durability;
    if (opts.stream) {
      let events = 0;
      for await (const _ of await app.stream({ count: 0 }, { ...config, streamMode: ["values", "updates"] })) events++;
      if (events < NODES) throw new Error(`${name}: ${events} events`);
      return;
    }
    const out = await app.invoke({ count: 0 }, config);
    if (out.count !== NODES) throw new Error(`${name}: count ${out.count}, want ${NODES}`);
  };
  for (let i = 0; i < WARMUP; i++) await run(i, "warm");
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await run(i, "run");
  const ns = Number(process.hrtime.bigint() - t0);
  return ns / 1e6 / (N * NODES);
}

async function sqliteSaver() {
  try {
    const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
    return SqliteSaver.fromConnString(":memory:");
  } catch (err) {
    return { error: String(err && err.message ? err.message : err).split("\n")[0] };
  }
}

const result = {
  langgraph: require("@langchain/langgraph/package.json").version,
  node: process.version,
  invocations: N,
  nodes: NODES,
  no_checkpointer_ms_per_step: await measure("none", null),
  memory_saver_ms_per_step: await measure("memory", new MemorySaver()),
  memory_saver_async_ms_per_step: await measure("memory-async", new MemorySaver(), { durability: "async" }),
  memory_saver_exit_ms_per_step: await measure("memory-exit", new MemorySaver(), { durability: "exit" }),
  subgraph_ms_per_step: await measure("subgraph", null, { subgraph: true }),
  subgraph_memory_saver_ms_per_step: await measure("subgraph-memory", new MemorySaver(), { subgraph: true }),
  stream_ms_per_step: await measure("stream", null, { stream: true }),
};
const sq = await sqliteSaver();
if (sq && !sq.error) {
  result.sqlite_saver_ms_per_step = await measure("sqlite", sq);
} else {
  result.sqlite_saver_error = sq ? sq.error : "not installed";
}
console.log(JSON.stringify(result));
