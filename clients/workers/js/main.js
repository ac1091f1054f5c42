// A worker process for a remote kind whose logic is the counter:
//
//   NATS_URL=nats://127.0.0.1:4222 EA_KIND=counter node main.js
//
// with ea-node --remote-kinds counter (or counter:msgpack). Settings, from
// the environment: NATS_URL (default nats://127.0.0.1:4222), EA_PREFIX
// (default ea), EA_KIND (default counter), EA_WORKER_DELAY_MS (hold every
// request that long before answering: to see timeouts and failover). It
// prints "ready" once subscribed; SIGINT or SIGTERM drains and stops it.
import { connect, serve } from "./worker.js";
import { counter } from "./counter.js";

const url = process.env.NATS_URL || "nats://127.0.0.1:4222";
const prefix = process.env.EA_PREFIX || "ea";
const kind = process.env.EA_KIND || "counter";
const delayMs = Number(process.env.EA_WORKER_DELAY_MS || 0);

const nc = await connect({ servers: url, name: `effectors-worker-js ${kind}` });
serve(nc, kind, counter, { prefix, delayMs, types: ["inc"], log: (line) => console.log(line) });
await nc.flush();
console.log(`ready: serving kind ${kind} on ${prefix}.logic.${kind} (queue group ${prefix}.logic.${kind})`);

for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    nc.drain().then(() => process.exit(0));
  });
}
const err = await nc.closed();
if (err) {
  console.error(`connection closed: ${err.message}`);
  process.exit(1);
}
