// The effectors remote-kind protocol (docs/polyglot.md) for JavaScript: a
// worker serves the logic of one kind. The node keeps order, state,
// effectively-once and dead letters; the worker only computes, for one
// record and the current state, the new state and the records to send. It
// keeps nothing between requests, so any number of workers may share a kind
// (a NATS queue group) and a worker may die at any time: the node retries
// the record it held.
import { randomBytes } from "node:crypto";
import { connect } from "nats";
import { decode as mpDecode, encode as mpEncode } from "@msgpack/msgpack";

const JSON_TYPE = "application/json";
const MSGPACK_TYPE = "application/msgpack";
const VERSION = 1;

const text = new TextDecoder();
const bytes = new TextEncoder();

/**
 * An error retrying cannot fix: the node sends the record to dead letters at
 * once. Any other error thrown by the logic is retried with the kind's
 * retry policy.
 */
export class PermanentError extends Error {
  constructor(message) {
    super(message);
    this.name = "PermanentError";
    this.permanent = true;
  }
}

/**
 * Records a logic returns to send. Each is { op, type, payload, ... } as in
 * docs/polyglot.md; these helpers build them.
 */
export const send = (to, type, payload, extra = {}) => ({ op: "send", to, type, payload, ...extra });
export const emit = (type, payload, extra = {}) => ({ op: "emit", type, payload, ...extra });
export const reply = (type, payload, extra = {}) => ({ op: "reply", type, payload, ...extra });

/**
 * answer computes the reply to one decoded request with logic(record, state,
 * request), which returns { state, records } (or a promise of it) or throws.
 */
export async function answer(logic, req) {
  if (req.v !== VERSION) {
    return { error: { message: `protocol version ${req.v}: this worker speaks ${VERSION}`, permanent: true } };
  }
  try {
    const out = await logic(req.record, req.state, req);
    if (out === null || typeof out !== "object" || !("state" in out)) {
      throw new PermanentError("logic returned no { state }");
    }
    return { state: out.state, records: out.records ?? [] };
  } catch (err) {
    return { error: { message: String(err?.message ?? err), permanent: err?.permanent === true } };
  }
}

/**
 * serve subscribes logic to the requests of kind on conn, in the kind's
 * queue group, and answers each. It returns the subscription; await
 * sub.closed to wait until it ends (drain the connection to stop).
 *
 * options.types are the record types logic handles, announced to the nodes
 * (ea send refuses others; none: any type). options.prefix is the subject prefix (default "ea"); options.delayMs holds
 * each request that long before answering (to try timeouts and failover);
 * options.log receives a line per held request.
 */
export function serve(nc, kind, logic, options = {}) {
  const prefix = options.prefix ?? "ea";
  const subject = `${prefix}.logic.${kind}`;
  const sub = nc.subscribe(subject, { queue: subject });
  announce(nc, prefix, kind, options.types ?? []);
  (async () => {
    for await (const m of sub) {
      handle(m, logic, options).catch((err) => console.error(`worker: ${err?.stack ?? err}`));
    }
  })();
  return sub;
}

/**
 * announce answers the discovery pings of kind's workers ($SRV.PING.<prefix>-logic-<kind>,
 * docs/polyglot.md "Discovery") with the NATS micro protocol's ping response, naming this
 * worker and the record types it handles, so that ea kinds counts it and ea send refuses
 * other types.
 */
function announce(nc, prefix, kind, types) {
  const name = `${prefix}-logic-${kind}`;
  const id = randomBytes(8).toString("hex");
  const reply = bytes.encode(JSON.stringify({
    type: "io.nats.micro.v1.ping_response", name, id, version: "1.0.0",
    metadata: { kind, types: types.join(",") },
  }));
  nc.subscribe(`$SRV.PING.${name}`, { callback: (err, m) => { if (!err) m.respond(reply); } });
}

async function handle(m, logic, options) {
  if (m.headers?.get("EA-Probe")) {
    m.respond(); // a probe: the node asks whether a worker is there
    return;
  }
  const ct = m.headers?.get("Content-Type") || JSON_TYPE;
  const msgpack = ct === MSGPACK_TYPE;
  let req;
  try {
    req = msgpack ? mpDecode(m.data) : JSON.parse(text.decode(m.data));
  } catch (err) {
    m.respond(encode({ error: { message: `request does not decode as ${ct}: ${err.message}`, permanent: true } }, msgpack));
    return;
  }
  if (options.delayMs > 0) {
    options.log?.(`holding record ${req.record?.id} for ${options.delayMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, options.delayMs));
  }
  m.respond(encode(await answer(logic, req), msgpack));
}

function encode(v, msgpack) {
  return msgpack ? mpEncode(v) : bytes.encode(JSON.stringify(v));
}

export { connect };
