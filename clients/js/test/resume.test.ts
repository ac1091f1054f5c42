// Subscriptions of every topic resumed after a dropped connection: each
// delivers exactly what the log holds, with no gap and no duplicate.

import { afterEach, describe, expect, it } from "vitest";

import type { Client, DeadFrame, OrchestrationFrame, RecordFrame, RecordJSON, StateFrame } from "../src/index.js";
import { all, eventually, GatewayProxy, newClient, unique } from "./helpers.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) {
    await f();
  }
});

function client(...a: Parameters<typeof newClient>): Client {
  const c = newClient(...a);
  cleanups.push(() => c.close());
  return c;
}

function increasing(xs: number[]): boolean {
  return xs.every((x, i) => i === 0 || x > xs[i - 1]);
}

describe("subscriptions", () => {
  it("of every topic resume after a dropped connection with no gap and no duplicate", async () => {
    const p = await new GatewayProxy().listen();
    cleanups.push(() => p.close());
    const direct = client();
    await direct.connect();
    const ref = `counter/${unique("res")}`;
    await direct.create(ref);

    const c = client({ url: `ws://${p.host}/ws`, reconnect: { initialDelay: 50, maxDelay: 200 } });
    let welcomes = 0;
    c.on("welcome", () => welcomes++);
    await c.connect();

    const outbox: RecordFrame[] = [];
    const mailbox: RecordFrame[] = [];
    const states: StateFrame[] = [];
    const logged: RecordJSON[] = [];
    const dead: DeadFrame[] = [];
    const orchs: OrchestrationFrame[] = [];
    const errors: unknown[] = [];
    const onError = (e: unknown) => errors.push(e);
    const subs = [
      c.subscribe({ topic: "outbox", effector: ref, from: 1 }, (f) => outbox.push(f), { onError }),
      c.subscribe({ topic: "mailbox", effector: ref, from: 1 }, (f) => mailbox.push(f), { onError }),
      c.subscribe({ topic: "state", effector: ref }, (f) => states.push(f), { onError }),
      c.subscribe({ topic: "records", effector: ref }, (f) => logged.push(...f.records), { onError }),
      c.subscribe({ topic: "dead", effector: ref, from: 1 }, (f) => dead.push(f), { onError }),
      c.subscribe({ topic: "orchestration" }, (f) => orchs.push(f), { onError }),
    ];
    await eventually("every subscription active", () => subs.every((s) => s.status === "active"));

    const sendSome = async (n: number, bad: number) => {
      for (let i = 0; i < n; i++) {
        await direct.send(ref, { type: "inc", payload: { by: 1 } }).acked;
      }
      for (let i = 0; i < bad; i++) {
        await direct.send(ref, { type: "inc", payload: { by: "x" } }).acked; // not a number: a dead letter
      }
    };
    await sendSome(3, 1);
    const o1 = await direct.orchStart("demo", { text: "resume one" });
    await eventually("the first frames", () =>
      outbox.length === 3 && mailbox.length === 4 && dead.length === 1 && orchs.some((o) => o.id === o1) &&
      logged.length === 7 && states.some((s) => (s.document?.state as { count: number })?.count === 3),
    );

    // Drop the connection; more happens while the client is away.
    p.offline();
    await eventually("the client sees the drop", () => c.status !== "open");
    expect(subs.every((s) => s.status === "pending")).toBe(true);
    await sendSome(3, 1);
    const o2 = await direct.orchStart("demo", { text: "resume two" });
    await eventually("the second orchestration waiting", async () => (await direct.orchStatus(o2)).status === "WAITING");
    await eventually("the state applied", async () => ((await direct.state(ref)).state as { count: number }).count === 6);
    p.online();

    await eventually("the missing frames", () =>
      outbox.length === 6 && mailbox.length === 8 && dead.length === 2 && orchs.some((o) => o.id === o2 && o.orchestration?.status === "WAITING") &&
      states.some((s) => (s.document?.state as { count: number })?.count === 6),
    );
    await eventually("the log caught up", async () => {
      const log = await all(direct, { effector: ref });
      return logged.length === log.length && log.length === 14;
    });
    expect(welcomes).toBe(2);
    expect(errors).toEqual([]);

    // Exactly the log: every stream sequence once, in order.
    const truthOut = await all(direct, { effector: ref, box: "outbox" });
    const truthIn = await all(direct, { effector: ref, box: "mailbox" });
    expect(outbox.map((f) => f.seq)).toEqual(truthOut.map((r) => r.seq));
    expect(mailbox.map((f) => f.record.id)).toEqual(truthIn.map((r) => r.id));
    expect(increasing(mailbox.map((f) => f.seq))).toBe(true);
    expect(outbox.map((f) => (f.record.json as { count: number }).count)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(increasing(dead.map((f) => f.seq))).toBe(true);
    expect(dead.map((f) => f.record.type)).toEqual(["inc", "inc"]);
    expect(increasing(states.map((f) => f.revision))).toBe(true);
    expect(increasing(orchs.map((f) => f.revision))).toBe(true);
    const ids = logged.map((r) => `${r.box}:${r.id}`);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual(
      (await all(direct, { effector: ref })).map((r) => `${r.box}:${r.id}`).sort(),
    );
    // Positions are the next frame's.
    expect(subs[0].position.from).toBe(outbox[5].seq + 1);
    expect(subs[3].position.cursor).toBeTruthy();

    await Promise.all(subs.map((s) => s.close()));
    expect(subs.every((s) => s.status === "closed")).toBe(true);
    await direct.send(ref, { type: "inc", payload: { by: 1 } }).acked;
    await eventually("the state applied", async () => ((await direct.state(ref)).state as { count: number }).count === 7);
    await c.ping();
    expect(outbox).toHaveLength(6);
  });

  it("that the gateway refuses fail with the code, and restart", async () => {
    const c = client();
    await c.connect();
    const errors: string[] = [];
    const s = c.subscribe({ topic: "records", effector: "counter/x", cursor: "not-a-cursor" }, () => undefined, {
      onError: (e) => errors.push(e.code),
    });
    await eventually("the failure", () => s.status === "failed");
    expect(errors).toHaveLength(1);
    expect(["bad_request", "subscription_failed"]).toContain(errors[0]);
    expect(s.error?.fromGateway).toBe(true);
    const bad = c.subscribe({ topic: "mailbox" } as never, () => undefined, { onError: (e) => errors.push(e.code) });
    await eventually("the refusal", () => bad.status === "failed");
    expect(errors[1]).toBe("bad_request");
    bad.restart();
    await eventually("the second refusal", () => errors.length === 3);
    await c.ping();
  });
});
