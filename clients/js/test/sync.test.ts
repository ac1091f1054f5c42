// Sends that outlive connections and processes: local_only until the ack,
// re-sent once with their ids when the connection returns, stored once.

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";

import { FileStore, isEffectorsError, MemoryStore, type AckFrame, type Client, type SendUpdate } from "../src/node.js";
import { eventually, gateway, GatewayProxy, newClient, unique } from "./helpers.js";

const run = promisify(execFile);
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) {
    await f();
  }
});

async function proxy(): Promise<GatewayProxy> {
  const p = await new GatewayProxy().listen();
  cleanups.push(() => p.close());
  return p;
}

function client(...a: Parameters<typeof newClient>): Client {
  const c = newClient(...a);
  cleanups.push(() => c.close());
  return c;
}

async function count(c: Client, ref: string): Promise<number> {
  return ((await c.state(ref)).state as { count: number }).count;
}

/** The records of the effector's mailbox with this id, from the record store. */
async function stored(c: Client, ref: string, id: string): Promise<number> {
  const page = await c.query({ effector: ref, box: "mailbox", limit: 1000 });
  return page.records.filter((r) => r.id === id).length;
}

describe("sends", () => {
  it("stay local_only while the gateway is unreachable, then are sent once and acked", async () => {
    const p = await proxy();
    const direct = client();
    await direct.connect();
    const ref = `counter/${unique("off")}`;
    await direct.create(ref);

    const store = new MemoryStore();
    const c = client({ url: `ws://${p.host}/ws`, store, reconnect: { initialDelay: 50, maxDelay: 200 } });
    const updates: SendUpdate[] = [];
    c.on("send", (u) => updates.push(u));
    await c.connect();
    p.offline();
    await eventually("the client sees the drop", () => c.status !== "open");
    const sends = [1, 2, 3].map((by) => c.send(ref, { type: "inc", payload: { by } }));
    await Promise.all(sends.map((s) => s.saved));
    expect(sends.map((s) => s.status)).toEqual(["local_only", "local_only", "local_only"]);
    expect((await store.list()).map((s) => s.id).sort()).toEqual(sends.map((s) => s.id).sort());
    const attempts = p.attempts.length;
    await eventually("reconnect attempts while offline", () => p.attempts.length >= attempts + 2);

    // A request made while disconnected waits for the connection.
    const waiting = c.state(ref);

    p.online();
    expect((await waiting).id).toBe(ref.split("/")[1]);
    const acks = await Promise.all(sends.map((s) => s.acked));
    expect(acks.map((a) => a.id)).toEqual(sends.map((s) => s.id));
    expect(acks.every((a) => !a.duplicate)).toBe(true);
    expect(sends.map((s) => s.status)).toEqual(["acked", "acked", "acked"]);
    expect(await store.list()).toEqual([]);
    // Each id acked once, in order, and applied once.
    expect(updates.filter((u) => u.status === "acked").map((u) => u.id)).toEqual(sends.map((s) => s.id));
    expect(acks[0].seq).toBeLessThan(acks[1].seq);
    expect(acks[1].seq).toBeLessThan(acks[2].seq);
    await eventually("the state", async () => (await count(direct, ref)) === 6);
    for (const s of sends) {
      await eventually(`${s.id} in the record store`, async () => (await stored(direct, ref, s.id)) === 1);
    }
  });

  it("stay kept when the client is closed before their ack, and a new client on the store sends them", async () => {
    const p = await proxy();
    const direct = client();
    await direct.connect();
    const ref = `counter/${unique("closed")}`;
    await direct.create(ref);
    const store = new MemoryStore();
    const first = newClient({ url: `ws://${p.host}/ws`, store });
    await first.connect();
    p.hold(); // the send goes out; no ack comes back
    const s = first.send(ref, { type: "inc", payload: { by: 2 } });
    await s.saved;
    await eventually("stored and applied", async () => (await count(direct, ref)) === 2);
    first.close();
    const err = await s.acked.then(() => undefined, (e: unknown) => e);
    expect(isEffectorsError(err, "closed")).toBe(true);
    expect(s.status).toBe("local_only");
    expect((await store.list()).map((x) => x.id)).toEqual([s.id]);

    p.online();
    const second = client({ url: `ws://${p.host}/ws`, store });
    const [h] = await second.pendingSends();
    expect(h.id).toBe(s.id);
    await second.connect();
    expect(await h.acked).toMatchObject({ id: s.id, duplicate: true });
    expect(await store.list()).toEqual([]);
    expect(await count(direct, ref)).toBe(2);
  });

  it("whose ack was lost are re-sent with their id and acked as duplicates, stored once", async () => {
    const p = await proxy();
    const direct = client();
    await direct.connect();
    const ref = `counter/${unique("lost")}`;
    await direct.create(ref);

    const c = client({ url: `ws://${p.host}/ws`, reconnect: { initialDelay: 50, maxDelay: 200 } });
    await c.connect();
    p.hold(); // the gateway gets the send; its ack never comes back
    const s = c.send(ref, { type: "inc", payload: { by: 7 } });
    await eventually("the record stored and applied", async () => (await count(direct, ref)) === 7);
    expect(s.status).toBe("local_only");
    const inFlight = c.state(ref); // answered, but the answer is held

    p.online();
    p.cut(); // the held ack is lost with the connection
    // A request whose connection dropped before its answer: disconnected.
    const err = await inFlight.then(() => undefined, (e: unknown) => e);
    expect(isEffectorsError(err, "disconnected")).toBe(true);
    const ack: AckFrame = await s.acked;
    expect(ack).toMatchObject({ id: s.id, duplicate: true });
    expect(s.status).toBe("acked");
    await eventually(`${s.id} in the record store`, async () => (await stored(direct, ref, s.id)) === 1);
    expect(await count(direct, ref)).toBe(7);
    expect((await direct.get(s.id)).seq).toBe(ack.seq);
  });

  it("survive a process restart (FileStore) and are acked once", async () => {
    const direct = client();
    await direct.connect();
    const ref = `counter/${unique("restart")}`;
    await direct.create(ref);
    const file = join(mkdtempSync(join(tmpdir(), "effectors-client-store-")), "sends.json");
    const script = join(import.meta.dirname, "fixtures", "send.mjs");
    const g = gateway();

    // The first process sends while nothing listens, and exits.
    const closed = await new GatewayProxy().listen();
    const deadURL = `ws://${closed.host}/ws`;
    await closed.close();
    const first = JSON.parse((await run("node", [script, "send", deadURL, g.token, file, ref, "4"])).stdout);
    expect(first.status).toBe("local_only");
    const kept = JSON.parse(readFileSync(file, "utf8"));
    expect(kept).toMatchObject([{ id: first.id, to: ref, record: { id: first.id, type: "inc", payload: { by: 4 } } }]);

    // The second re-sends it with its id.
    const second = JSON.parse((await run("node", [script, "resume", `ws://${g.host}/ws`, g.token, file])).stdout);
    expect(second.pending).toEqual([first.id]);
    expect(second.acks).toHaveLength(1);
    expect(second.acks[0]).toMatchObject({ id: first.id, stream: "EA_MBOX" });
    expect(await new FileStore(file).list()).toEqual([]);
    await eventually("the state", async () => (await count(direct, ref)) === 4);
    await eventually(`${first.id} in the record store`, async () => (await stored(direct, ref, first.id)) === 1);

    // A third process finds nothing to send.
    const third = JSON.parse((await run("node", [script, "resume", `ws://${g.host}/ws`, g.token, file])).stdout);
    expect(third).toEqual({ pending: [], acks: [] });
  });

  it("reconnect with a capped, jittered backoff", async () => {
    const p = await proxy();
    p.offline();
    const c = client({ url: `ws://${p.host}/ws`, reconnect: { initialDelay: 40, maxDelay: 320 } });
    // The delay of each attempt: from the drop (reconnecting) to the next
    // attempt (connecting), as the client's timers run them.
    const delays: number[] = [];
    let dropped = 0;
    c.on("status", (s) => {
      if (s === "reconnecting") {
        dropped = performance.now();
      } else if (s === "connecting" && dropped) {
        delays.push(performance.now() - dropped);
      }
    });
    c.connect().catch(() => undefined);
    await eventually("ten attempts", () => delays.length >= 10, 30_000);
    expect(p.attempts.length).toBeGreaterThanOrEqual(10); // each reached the proxy
    // 40·2^n ms capped at 320, each 50–100 % of it (plus event-loop lag).
    delays.slice(0, 10).forEach((d, i) => {
      const nominal = Math.min(320, 40 * 2 ** i);
      expect(d).toBeGreaterThanOrEqual(nominal * 0.5 - 2);
      // Uncapped, the late ones would be 2.5 s, 5 s, 10 s, …
      expect(d).toBeLessThan(nominal + 1500);
    });
    // Jittered: the capped delays differ.
    expect(new Set(delays.slice(4, 10).map((d) => Math.round(d))).size).toBeGreaterThan(1);
    p.online();
    await eventually("connected", () => c.status === "open");
  });
});
