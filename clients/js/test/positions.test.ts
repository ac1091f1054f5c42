// Kind-wide outbox and state subscriptions resume from a position per
// stream (bucket), built from the frames' stream and seq (bucket and
// revision): with stream groups (3 outbox streams and state buckets, a
// deployment of this file's own) and without (the shared one, 1 of each).
// Across dropped connections, and from a vector kept by an earlier
// subscription, each delivers exactly what the log holds: no gap, no
// duplicate.

import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";

import type { Client, ClientOptions, Positions, RecordFrame, StateFrame } from "../src/index.js";
import { type Deployment, startDeployment } from "./deployment.js";
import { all, eventually, gateway, GatewayProxy, newClient, unique } from "./helpers.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) {
    await f();
  }
});

const count = (x: { count?: number } | unknown) => (x as { count?: number } | undefined)?.count;

/** The next position of each stream (bucket) after the frames: the last seq (revision) + 1. */
function nextOf(frames: { name: string; at: number }[]): Positions {
  const p: Positions = {};
  for (const { name, at } of frames) {
    p[name] = Math.max(p[name] ?? 0, at + 1);
  }
  return p;
}

/** Whether, per stream (bucket), the positions are strictly increasing: none twice, in order. */
function increasingPerName(frames: { name: string; at: number }[]): boolean {
  const last = new Map<string, number>();
  for (const { name, at } of frames) {
    if ((last.get(name) ?? 0) >= at) {
      return false;
    }
    last.set(name, at);
  }
  return true;
}

const outboxAt = (fs: RecordFrame[]) => fs.map((f) => ({ name: f.stream, at: f.seq }));
const stateAt = (fs: StateFrame[]) => fs.map((f) => ({ name: f.bucket, at: f.revision }));

describe.each([3, 1])("with %i stream group(s), a kind-wide subscription", (groups) => {
  let d: Deployment | undefined;
  let host = "";
  let token = "";
  beforeAll(async () => {
    if (groups > 1) {
      d = await startDeployment(inject("binaries"), { nodeArgs: ["--stream-groups", String(groups)] });
      ({ host, token } = d);
    } else {
      ({ host, token } = gateway());
    }
  });
  afterAll(async () => {
    await d?.stop();
  });

  function client(opts: Partial<ClientOptions> = {}): Client {
    const c = newClient({ url: `ws://${host}/ws`, token, ...opts });
    cleanups.push(() => c.close());
    return c;
  }

  async function proxied(): Promise<{ p: GatewayProxy; c: Client }> {
    const p = await new GatewayProxy({}, host).listen();
    cleanups.push(() => p.close());
    return { p, c: client({ url: `ws://${p.host}/ws`, reconnect: { initialDelay: 50, maxDelay: 200 } }) };
  }

  // effectors creates counters of a fresh prefix and sends each an inc
  // (count 1) until every group's mailbox stream holds two of them (the
  // acks name the stream), so that the kind's frames come from every
  // outbox stream and state bucket; it waits until every count is 1.
  async function effectors(direct: Client, prefix: string): Promise<string[]> {
    const per = new Map<string, number>();
    const refs: string[] = [];
    while (per.size < groups || [...per.values()].some((n) => n < 2)) {
      if (refs.length === 64) {
        throw new Error(`64 effectors and not two in each of ${groups} groups: ${JSON.stringify([...per])}`);
      }
      const ref = `counter/${prefix}-${refs.length}`;
      await direct.create(ref);
      const ack = await direct.send(ref, { type: "inc", payload: { by: 1 } }).acked;
      per.set(ack.stream, (per.get(ack.stream) ?? 0) + 1);
      refs.push(ref);
    }
    expect(per.size).toBe(groups);
    await applied(direct, refs, 1);
    return refs;
  }

  // incAll sends incs to each counter, at from, until it is at to, and
  // waits until they are applied.
  async function incAll(direct: Client, refs: string[], from: number, to: number): Promise<void> {
    for (const ref of refs) {
      for (let n = from; n < to; n++) {
        await direct.send(ref, { type: "inc", payload: { by: 1 } }).acked;
      }
    }
    await applied(direct, refs, to);
  }

  async function applied(direct: Client, refs: string[], to: number): Promise<void> {
    await eventually(`every count at ${to}`, async () => {
      for (const ref of refs) {
        if (count((await direct.state(ref)).state) !== to) {
          return false;
        }
      }
      return true;
    });
  }

  it("of the outbox and of the state resumes across reconnects with positions, no gap and no duplicate", async () => {
    const direct = client();
    await direct.connect();
    const { p, c } = await proxied();
    let welcomes = 0;
    c.on("welcome", () => welcomes++);
    await c.connect();
    const prefix = unique("pos");
    const outbox: RecordFrame[] = [];
    const states: StateFrame[] = [];
    const errors: unknown[] = [];
    const onError = (e: unknown) => errors.push(e);
    const so = c.subscribe({ topic: "outbox", kind: "counter" }, (f) => outbox.push(f), { onError });
    const ss = c.subscribe({ topic: "state", kind: "counter" }, (f) => states.push(f), { onError });
    await eventually("both subscriptions active", () => so.status === "active" && ss.status === "active");
    // The subscribed frame names every outbox stream: the vector of a
    // subscription from now, before its first frame.
    expect(Object.keys(so.position.positions ?? {}).length).toBe(groups);

    const mine = (ref: string) => ({
      out: outbox.filter((f) => f.record.from === ref).map((f) => count(f.record.json)),
      state: states.filter((f) => f.effector === ref).map((f) => count(f.document?.state)),
    });
    const caughtUp = (refs: string[], n: number) =>
      refs.every((r) => mine(r).out.length === n && mine(r).state.at(-1) === n);

    // Dropped before the first frame: what is stored while away comes on
    // reconnect, from the positions of the subscribed frame.
    p.offline();
    await eventually("the client sees the drop", () => c.status !== "open");
    const refs = await effectors(direct, prefix);
    p.online();
    await eventually("the first outputs", () => caughtUp(refs, 1));

    // Live, then dropped again after frames of every stream.
    await incAll(direct, refs, 1, 3);
    await eventually("live outputs", () => caughtUp(refs, 3));
    p.offline();
    await eventually("the client sees the second drop", () => c.status !== "open");
    expect([so.status, ss.status]).toEqual(["pending", "pending"]);
    await incAll(direct, refs, 3, 5);
    p.online();
    await eventually("the outputs stored while away", () => caughtUp(refs, 5));
    await c.ping();

    expect(errors).toEqual([]);
    expect(welcomes).toBe(3);
    for (const ref of refs) {
      expect(mine(ref).out).toEqual([1, 2, 3, 4, 5]);
      const seen = mine(ref).state;
      expect(seen.every((n, i) => i === 0 || (n ?? 0) >= (seen[i - 1] ?? 0))).toBe(true);
      // Exactly the log: the effector's outbox records, each once.
      const log = await all(direct, { effector: ref, box: "outbox" });
      expect(outbox.filter((f) => f.record.from === ref).map((f) => `${f.stream}:${f.seq}`)).toEqual(log.map((r) => `${r.stream}:${r.seq}`));
    }
    expect(increasingPerName(outboxAt(outbox))).toBe(true);
    expect(increasingPerName(stateAt(states))).toBe(true);
    expect(new Set(outbox.filter((f) => f.record.from?.startsWith(`counter/${prefix}-`)).map((f) => f.stream)).size).toBe(groups);
    expect(new Set(states.filter((f) => f.effector.startsWith(`counter/${prefix}-`)).map((f) => f.bucket)).size).toBe(groups);
    // The position is the vector: each stream's last seq + 1.
    const pos = so.position.positions!;
    expect(so.position.from).toBeUndefined();
    expect(Object.keys(pos).length).toBe(groups);
    expect(pos).toMatchObject(nextOf(outboxAt(outbox)));
    expect(ss.position.positions).toEqual(nextOf(stateAt(states)));
  });

  it("starts from a saved position vector and resumes from it", async () => {
    const direct = client();
    await direct.connect();
    const prefix = unique("saved");
    const first: RecordFrame[] = [];
    const firstStates: StateFrame[] = [];
    const so = direct.subscribe({ topic: "outbox", kind: "counter" }, (f) => first.push(f));
    const ss = direct.subscribe({ topic: "state", kind: "counter" }, (f) => firstStates.push(f));
    await eventually("both subscriptions active", () => so.status === "active" && ss.status === "active");
    const refs = await effectors(direct, prefix);
    const ofMine = (f: RecordFrame) => refs.includes(f.record.from ?? "");
    await eventually("the first outputs", () =>
      first.filter(ofMine).length === refs.length && refs.every((r) => firstStates.some((f) => f.effector === r && count(f.document?.state) === 1)),
    );
    // What an app keeps, as JSON.
    const saved = JSON.parse(JSON.stringify({ out: so.position.positions, state: ss.position.positions })) as { out: Positions; state: Positions };
    await so.close();
    await ss.close();
    expect(Object.keys(saved.out).length).toBe(groups);

    // More while no one follows the kind, then a new client from the vector.
    await incAll(direct, refs, 1, 2);
    const { p, c } = await proxied();
    await c.connect();
    const outbox: RecordFrame[] = [];
    const states: StateFrame[] = [];
    const errors: unknown[] = [];
    const onError = (e: unknown) => errors.push(e);
    const ro = c.subscribe({ topic: "outbox", kind: "counter", positions: saved.out }, (f) => outbox.push(f), { onError });
    const rs = c.subscribe({ topic: "state", kind: "counter", positions: saved.state }, (f) => states.push(f), { onError });
    const counts = (ref: string) => outbox.filter((f) => f.record.from === ref).map((f) => count(f.record.json));
    const stateCounts = (ref: string) => states.filter((f) => f.effector === ref).map((f) => count(f.document?.state));
    await eventually("the outputs after the vector", () => refs.every((r) => counts(r).length === 1 && stateCounts(r).at(-1) === 2));

    // Dropped, more, back: resumed from the vector it keeps.
    p.offline();
    await eventually("the client sees the drop", () => c.status !== "open");
    await incAll(direct, refs, 2, 3);
    p.online();
    await eventually("the outputs stored while away", () => refs.every((r) => counts(r).length === 2 && stateCounts(r).at(-1) === 3));
    await c.ping();

    expect(errors).toEqual([]);
    expect([ro.status, rs.status]).toEqual(["active", "active"]);
    for (const ref of refs) {
      expect(counts(ref)).toEqual([2, 3]);
      // Only changes after the vector: not the documents it had seen.
      expect(stateCounts(ref).every((n) => (n ?? 0) >= 2)).toBe(true);
    }
    // Nothing at or before the vector, nothing twice.
    for (const f of outbox) {
      expect(f.seq).toBeGreaterThanOrEqual(saved.out[f.stream] ?? 1);
    }
    for (const f of states) {
      expect(f.revision).toBeGreaterThanOrEqual(saved.state[f.bucket] ?? 1);
    }
    expect(increasingPerName(outboxAt(outbox))).toBe(true);
    expect(increasingPerName(stateAt(states))).toBe(true);
    expect(ro.position.positions).toEqual({ ...saved.out, ...nextOf(outboxAt(outbox)) });
    expect(rs.position.positions).toMatchObject(nextOf(stateAt(states)));
  });
});

describe("positions in a subscribe spec", () => {
  it("are refused at once where the gateway would refuse them", () => {
    const c = newClient();
    cleanups.push(() => c.close());
    const bad: unknown[] = [
      { topic: "outbox", effector: "counter/c1", positions: { EA_OUT: 1 } },
      { topic: "mailbox", effector: "counter/c1", positions: {} },
      { topic: "outbox", kind: "counter", from: 3, positions: { EA_OUT: 1 } },
      { topic: "outbox", kind: "counter", positions: { EA_OUT: 0 } },
      { topic: "state", kind: "counter", positions: { ea_state: 1.5 } },
      { topic: "state", kind: "counter", positions: [1] },
    ];
    for (const spec of bad) {
      expect(() => c.subscribe(spec as never, () => undefined), JSON.stringify(spec)).toThrowError(expect.objectContaining({ code: "invalid" }));
    }
    const ok = c.subscribe({ topic: "outbox", kind: "counter", positions: { EA_OUT: 7 } }, () => undefined);
    expect(ok.position).toEqual({ positions: { EA_OUT: 7 } });
  });
});
