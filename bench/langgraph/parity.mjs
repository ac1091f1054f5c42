// Prints how LangGraph.js behaves in the four cases of issue 19 item 10, so
// the Go engine's choices can be checked against it (graph/parity_test.go
// encodes this output):
//
//  1. subgraph: a subgraph node whose state shares keys with its parent;
//  2. order: the order of one super-step's writes to a reduced key
//     (nodes added zeta, alpha, mid; a Send fan-out);
//  3. stream: the events of stream() without a streamMode, and of
//     streamMode "values";
//  4. steps: checkpoint metadata (source, step) of two invocations of one
//     thread, of updateState, and of a fork (updateState at an older
//     checkpoint).
//
//   npm install && node parity.mjs
import { Annotation, Command, END, interrupt, MemorySaver, Send, START, StateGraph } from "@langchain/langgraph";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const out = (k, v) => console.log(`${k}: ${JSON.stringify(v)}`);
out("langgraph", require("@langchain/langgraph/package.json").version);

const State = Annotation.Root({
  count: Annotation({ reducer: (_cur, upd) => upd, default: () => 0 }),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  name: Annotation(),
});

// 1. Shared-state subgraph: the parent writes log ["p"], the child appends
// "c" and sets count; name is written by neither.
{
  const child = new StateGraph(State)
    .addNode("c", (s) => ({ log: ["c"], count: s.count * 10 }))
    .addEdge(START, "c")
    .compile();
  const parent = new StateGraph(State)
    .addNode("p", (s) => ({ log: ["p"], count: s.count + 1 }))
    .addNode("sub", child)
    .addEdge(START, "p")
    .addEdge("p", "sub")
    .addEdge("sub", END)
    .compile();
  out("subgraph.invoke", await parent.invoke({ count: 1, log: ["in"] }));
  const ups = [];
  for await (const u of await parent.stream({ count: 1, log: ["in"] }, { streamMode: "updates" })) ups.push(u);
  out("subgraph.updates", ups);
  // A sibling writing count (a LastValue key) in the subgraph's step.
  const par2 = new StateGraph(State)
    .addNode("sub", child)
    .addNode("other", () => ({ name: "other" }))
    .addEdge(START, "sub")
    .addEdge(START, "other")
    .compile();
  out("subgraph.sibling", await par2.invoke({ count: 1, log: ["in"] }));
  // A sibling writing name (a LastValue key the child does not write) in
  // the subgraph's step: with name unset, then with name in the input.
  const par3 = new StateGraph(State)
    .addNode("sub", child)
    .addNode("other", () => ({ name: "other" }))
    .addEdge(START, "sub")
    .addEdge(START, "other")
    .compile();
  for (const input of [{ count: 1 }, { count: 1, name: "in" }]) {
    try {
      out(`subgraph.sibling-lastvalue ${JSON.stringify(input)}`, await par3.invoke(input));
    } catch (e) {
      out(`subgraph.sibling-lastvalue ${JSON.stringify(input)} error`, `${e.name}: ${String(e.message).split("\n")[0]}`);
    }
  }
}

// 2. Write order within a super-step.
{
  const build = (names) => {
    const g = new StateGraph(State);
    for (const n of names) g.addNode(n, async () => { await new Promise((r) => setTimeout(r, n === "alpha" ? 20 : 0)); return { log: [n] }; });
    for (const n of names) g.addEdge(START, n);
    return g.compile();
  };
  out("order.added-zeta-alpha-mid", (await build(["zeta", "alpha", "mid"]).invoke({})).log);
  out("order.added-mid-zeta-alpha", (await build(["mid", "zeta", "alpha"]).invoke({})).log);
  // Sends: node "b" (a plain edge) and Sends to "w" with payloads 2, 1, 3,
  // plus an edge-triggered "a".
  const WS = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }), x: Annotation() });
  const g = new StateGraph(WS)
    .addNode("fan", () => ({}))
    .addNode("w", async (s) => { await new Promise((r) => setTimeout(r, 10 * (4 - s.x))); return { log: [`w${s.x}`] }; })
    .addNode("zz", () => ({ log: ["zz"] }))
    .addNode("aa", () => ({ log: ["aa"] }))
    .addEdge(START, "fan")
    .addConditionalEdges("fan", () => [new Send("w", { x: 2 }), new Send("w", { x: 1 }), new Send("w", { x: 3 })])
    .addEdge("fan", "zz")
    .addEdge("fan", "aa")
    .compile();
  out("order.sends", (await g.invoke({})).log);
  // Sends from two nodes added zeta then alpha: which node's Sends first?
  const h = new StateGraph(WS)
    .addNode("zeta", () => ({}))
    .addNode("alpha", () => ({}))
    .addNode("w", (s) => ({ log: [`w${s.x}`] }))
    .addEdge(START, "zeta")
    .addEdge(START, "alpha")
    .addConditionalEdges("zeta", () => [new Send("w", { x: "z1" }), new Send("w", { x: "z2" })])
    .addConditionalEdges("alpha", () => [new Send("w", { x: "a1" })])
    .compile();
  out("order.sends-two-sources", (await h.invoke({})).log);
}

// 3. Stream events.
{
  const g = new StateGraph(State)
    .addNode("a", (s) => ({ count: s.count + 1 }))
    .addNode("b", (s) => ({ count: s.count + 1 }))
    .addEdge(START, "a")
    .addEdge("a", "b")
    .addEdge("b", END)
    .compile();
  const collect = async (opts) => {
    const evs = [];
    for await (const ev of await g.stream({ count: 0 }, opts)) evs.push(ev);
    return evs;
  };
  out("stream.default", await collect({}));
  out("stream.values", await collect({ streamMode: "values" }));
  out("stream.updates", await collect({ streamMode: "updates" }));
  out("stream.values+updates", await collect({ streamMode: ["values", "updates"] }));
  // Continuing a paused thread (input null): is the current state emitted first?
  const p = new StateGraph(State)
    .addNode("a", (s) => ({ count: s.count + 1 }))
    .addNode("b", (s) => ({ count: s.count + 1 }))
    .addEdge(START, "a")
    .addEdge("a", "b")
    .addEdge("b", END)
    .compile({ checkpointer: new MemorySaver(), interruptBefore: ["b"] });
  const cfg = { configurable: { thread_id: "s" }, streamMode: "values" };
  const first = [];
  for await (const ev of await p.stream({ count: 0 }, cfg)) first.push(ev);
  const cont = [];
  for await (const ev of await p.stream(null, cfg)) cont.push(ev);
  out("stream.values-paused", first);
  out("stream.values-continue", cont);
  // Resuming an interrupt (Command resume) in values mode.
  const q = new StateGraph(State)
    .addNode("a", (s) => ({ count: s.count + 1 }))
    .addNode("ask", (s) => ({ name: interrupt("who?") }))
    .addEdge(START, "a")
    .addEdge("a", "ask")
    .addEdge("ask", END)
    .compile({ checkpointer: new MemorySaver() });
  const qcfg = { configurable: { thread_id: "q" }, streamMode: "values" };
  const asked = [];
  for await (const ev of await q.stream({ count: 0 }, qcfg)) asked.push(ev);
  const answered = [];
  for await (const ev of await q.stream(new Command({ resume: "Ada" }), qcfg)) answered.push(ev);
  out("stream.values-asked", asked);
  out("stream.values-resume", answered);
}

// 4. Steps in checkpoint metadata.
{
  const g = new StateGraph(State)
    .addNode("a", (s) => ({ count: s.count + 1 }))
    .addNode("b", (s) => ({ count: s.count + 1 }))
    .addEdge(START, "a")
    .addEdge("a", "b")
    .addEdge("b", END)
    .compile({ checkpointer: new MemorySaver() });
  const cfg = { configurable: { thread_id: "t" } };
  const hist = async () => {
    const rows = [];
    for await (const s of g.getStateHistory(cfg)) rows.push(`${s.metadata.source}:${s.metadata.step}:count=${s.values.count}`);
    return rows.reverse();
  };
  await g.invoke({ count: 0 }, cfg);
  out("steps.first-invoke", await hist());
  await g.invoke({ count: 10 }, cfg);
  out("steps.second-invoke", await hist());
  await g.updateState(cfg, { count: 100 });
  out("steps.update-state", (await hist()).slice(-1));
  await g.updateState(cfg, { count: 200 }, "a");
  out("steps.update-state-as-node", (await hist()).slice(-1));
  // Fork: update an older checkpoint (the first run's step 1, after "a").
  let old;
  for await (const s of g.getStateHistory(cfg)) if (s.metadata.step === 1 && s.values.count === 1) old = s;
  const forked = await g.updateState(old.config, { count: 50 });
  const fs = await g.getState(forked);
  out("steps.fork", { from: `${old.metadata.source}:${old.metadata.step}`, fork: `${fs.metadata.source}:${fs.metadata.step}`, next: fs.next });
  await g.invoke(null, forked);
  const head = await g.getState(cfg);
  out("steps.fork-continued-head", `${head.metadata.source}:${head.metadata.step}:count=${head.values.count}`);
  // Nothing left to run: invoking with null input on a finished thread.
  const cfg2 = { configurable: { thread_id: "t2" } };
  await g.invoke({ count: 0 }, cfg2);
  await g.updateState(cfg2, { count: 5 }, "a");
  const rows = [];
  for await (const s of g.getStateHistory(cfg2)) rows.push(`${s.metadata.source}:${s.metadata.step}:next=${s.next.join(",")}`);
  out("steps.update-as-node-on-finished", rows.reverse());
  await g.invoke(null, cfg2);
  const rows2 = [];
  for await (const s of g.getStateHistory(cfg2)) rows2.push(`${s.metadata.source}:${s.metadata.step}:count=${s.values.count}`);
  out("steps.continue-after-update", rows2.reverse());
}
