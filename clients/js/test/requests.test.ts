// Requests and errors against a real gateway: every helper, and errors by
// code.

import { afterEach, describe, expect, it } from "vitest";

import { EffectorsError, isEffectorsError, type Client } from "../src/index.js";
import { eventually, gateway, newClient, unique } from "./helpers.js";

const clients: Client[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) {
    c.close();
  }
});
function client(...a: Parameters<typeof newClient>): Client {
  const c = newClient(...a);
  clients.push(c);
  return c;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(EffectorsError);
    return (err as EffectorsError).code;
  }
  throw new Error("resolved, want an error");
}

describe("requests", () => {
  it("connects with the token and gets the welcome", async () => {
    const c = client();
    const w = await c.connect();
    expect(w).toMatchObject({ type: "welcome", version: 1, prefix: "ea", max_subscriptions: 64 });
    expect(c.status).toBe("open");
    await c.ping();
  });

  it("answers a wrong token with unauthorized, and connects after setToken", async () => {
    const c = client({ token: "wrong" });
    const statuses: string[] = [];
    c.on("status", (s) => statuses.push(s));
    const err = await c.connect().catch((e: unknown) => e);
    expect(isEffectorsError(err, "unauthorized")).toBe(true);
    expect(c.status).toBe("unauthorized");
    expect(await codeOf(c.state("counter/x"))).toBe("unauthorized");
    c.setToken(gateway().token);
    await c.connect();
    expect(statuses).toEqual(["connecting", "unauthorized", "connecting", "open"]);
  });

  it("creates, reads, lists, queries and terminates effectors", async () => {
    const c = client();
    await c.connect();
    const ref = `counter/${unique("req")}`;
    const doc = await c.create(ref, { count: 10 });
    expect(doc).toMatchObject({ kind: "counter", status: "IDLE", state: { count: 10 } });
    expect(await codeOf(c.create(ref))).toBe("exists");
    expect((await c.kinds()).map((k) => k.kind)).toContain("counter");
    const s = c.send(ref, { type: "inc", payload: { by: 5 } });
    const ack = await s.acked;
    expect(ack).toMatchObject({ type: "ack", id: s.id, stream: "EA_MBOX" });
    expect(ack.duplicate).toBeFalsy();
    await eventually("the record applied", async () => ((await c.state(ref)).state as { count: number }).count === 15);
    await eventually("the record in the record store", async () => {
      const page = await c.query({ effector: ref, box: "mailbox" });
      return page.records.some((r) => r.id === s.id);
    });
    const rec = await c.get(s.id);
    expect(rec).toMatchObject({ id: s.id, type: "inc", box: "mailbox", effector: ref, json: { by: 5 }, seq: ack.seq });
    await eventually("the effector listed", async () => {
      const page = await c.effectors({ kind: "counter", limit: 1000 });
      return page.effectors.some((e) => `${e.kind}/${e.id}` === ref);
    });
    const t = await c.terminate(ref);
    expect(t.status).toBe("TERMINATED");
    const refused = c.send(ref, { type: "inc", payload: { by: 1 } });
    expect(await codeOf(refused.acked)).toBe("terminated");
    expect(refused.status).toBe("refused");
    expect(await c.pendingSends()).toEqual([]);
  });

  it("gives errors by code", async () => {
    const c = client();
    await c.connect();
    expect(await codeOf(c.state(`counter/${unique("never")}`))).toBe("not_found");
    expect(await codeOf(c.state("counter"))).toBe("bad_request");
    expect(await codeOf(c.get(unique("no-such-record")))).toBe("not_found");
    expect(await codeOf(c.create(`nokind${unique("k")}/x`))).toBe("no_host");
    expect(await codeOf(c.request({ type: "no-such-frame" }))).toBe("unknown_type");
    expect(await codeOf(c.send(`counter/${unique("never")}`, { type: "inc" }).acked)).toBe("not_found");
    // Bad input is refused before anything is sent.
    expect(() => c.send("counter", {})).toThrow(EffectorsError);
    try {
      c.send("counter/a.b", {});
    } catch (err) {
      expect(isEffectorsError(err, "invalid")).toBe(true);
    }
    // The same id for another record: conflict, nothing stored.
    const ref = `counter/${unique("conf")}`;
    await c.create(ref);
    const id = c.newId();
    await c.send(ref, { id, type: "inc", payload: { by: 1 } }).acked;
    expect(await codeOf(c.send(ref, { id, type: "inc", payload: { by: 2 } }).acked)).toBe("conflict");
  });

  it("starts, inspects, feeds and cancels orchestrations", async () => {
    const c = client();
    await c.connect();
    const id = await c.orchStart("demo", { text: "from js" });
    expect(id).toMatch(/^[0-9A-Z]+$/);
    await eventually("the orchestration waiting for input", async () => (await c.orchStatus(id)).status === "WAITING");
    expect(await c.orchInput(id, { note: "ok" })).toEqual({ id, status: "RUNNING" });
    await eventually("the orchestration completed", async () => (await c.orchStatus(id)).status === "COMPLETED", 30_000);
    expect(await codeOf(c.orchCancel(id))).toBe("finished");
    const other = await c.orchStart("demo", { text: "to cancel" });
    await eventually("the second waiting", async () => (await c.orchStatus(other)).status === "WAITING");
    expect(await c.orchCancel(other)).toEqual({ id: other, status: "CANCELLED" });
    expect(await codeOf(c.orchInput(other, { note: "late" }))).toBe("finished");
    expect(await codeOf(c.orchStart(unique("no-such-orchestration")))).toBe("not_found");
  });

  it("rejects calls of a closed client with closed", async () => {
    const c = client({ requestTimeout: 2000 });
    await c.connect();
    c.close();
    expect(c.status).toBe("closed");
    expect(await codeOf(c.ping())).toBe("closed");
    expect(() => c.send("counter/x", {})).toThrow(EffectorsError);
  });
});
