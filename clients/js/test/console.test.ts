// The console's requests against a real gateway: dead letters listed,
// replayed and discarded, orchestrations listed, the node view; pages
// followed by cursor; errors by code.

import { afterEach, describe, expect, it } from "vitest";

import { EffectorsError, type Client, type DeadLetter, type OrchSummary } from "../src/index.js";
import { eventually, newClient, unique } from "./helpers.js";

const clients: Client[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) {
    c.close();
  }
});
function client(): Client {
  const c = newClient();
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

/** Follows a list's cursor to its last page, checking each page's size. */
async function pageAll<T>(limit: number, page: (cursor?: string) => Promise<{ items: T[]; cursor: string; more: boolean }>): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (let pages = 1; pages <= 100; pages++) {
    const p = await page(cursor);
    expect(p.items.length).toBeLessThanOrEqual(limit);
    items.push(...p.items);
    if (!p.more) {
      return { items, pages };
    }
    expect(p.cursor).not.toBe("");
    cursor = p.cursor;
  }
  throw new Error("more than 100 pages");
}

describe("console requests", () => {
  it("lists dead letters page by page, replays and discards one", async () => {
    const c = client();
    await c.connect();
    const ref = `counter/${unique("dead")}`;
    await c.create(ref);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const s = c.send(ref, { type: "inc", payload: { by: `x${i}` } }); // by is not a number: a dead letter
      await s.acked;
      ids.push(s.id);
    }
    const list = (limit: number) =>
      pageAll<DeadLetter>(limit, async (cursor) => {
        const p = await c.deadList({ effector: ref, order: "newest", limit, cursor });
        return { items: p.dead, cursor: p.cursor, more: p.more };
      });
    await eventually("five dead letters", async () => (await list(100)).items.length === 5);
    const { items: dead, pages } = await list(2);
    expect(pages).toBe(3);
    expect(dead.map((d) => d.record.id)).toEqual([...ids].reverse()); // newest first, no gap, no duplicate
    expect(dead[0]).toMatchObject({ effector: ref, reason: "decode", id: `dead:${ids[4]}` });
    const found = await c.deadList({ effector: ref, text: ids[2].toUpperCase() });
    expect(found.dead.map((d) => d.record.id)).toEqual([ids[2]]);
    expect((await c.deadList({ effector: ref, since: new Date(Date.now() + 3_600_000).toISOString() })).dead).toEqual([]);

    const replay = await c.deadReplay(dead[0].seq);
    expect(replay).toMatchObject({ cause: ids[4], effector: ref, type: "inc", dead_seq: dead[0].seq });
    expect(replay.id).not.toBe(ids[4]);
    expect(await c.deadDiscard(dead[0].seq)).toEqual({ seq: dead[0].seq, discarded: true });
    expect(await codeOf(c.deadDiscard(dead[0].seq))).toBe("not_found");
    expect(await codeOf(c.deadReplay(dead[0].seq))).toBe("not_found");
    await eventually("the replay's own dead letter, and the discarded one gone", async () => {
      const ds = (await list(100)).items;
      return ds.some((d) => d.record.id === replay.id && d.record.cause === ids[4]) && !ds.some((d) => d.seq === dead[0].seq);
    });
  });

  it("lists orchestrations page by page, filtered by the gateway", async () => {
    const c = client();
    await c.connect();
    const since = new Date(Date.now() - 1000).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(await c.orchStart("demo", { text: `list ${i}` }));
    }
    const list = (q: { status?: "WAITING" }) =>
      pageAll<OrchSummary>(2, async (cursor) => {
        const p = await c.orchList({ ...q, name: "demo", since, order: "newest", limit: 2, cursor });
        return { items: p.orchestrations, cursor: p.cursor, more: p.more };
      });
    // Other test files start "demo" orchestrations at the same time: the
    // lists may hold theirs too, so the checks are about these three (the
    // store's own tests count pages exactly).
    await eventually(
      "the three waiting",
      async () => {
        const waiting = (await list({ status: "WAITING" })).items.map((o) => o.id);
        return ids.every((id) => waiting.includes(id));
      },
      30_000,
    );
    const { items, pages } = await list({});
    expect(pages).toBeGreaterThanOrEqual(2); // pages of 2, three orchestrations or more
    expect(items.filter((o) => ids.includes(o.id)).map((o) => o.id).sort()).toEqual([...ids].sort());
    expect(new Set(items.map((o) => o.id)).size).toBe(items.length); // none listed twice
    expect(items.map((o) => o.revision)).toEqual(items.map((o) => o.revision).sort((a, b) => b - a));
    const one = await c.orchList({ search: ids[1].toLowerCase() });
    expect(one.orchestrations.map((o) => o.id)).toEqual([ids[1]]);
    for (const id of ids) {
      await c.orchCancel(id);
    }
  });

  it("refuses bad lists by code", async () => {
    const c = client();
    await c.connect();
    expect(await codeOf(c.deadList({ limit: 101 }))).toBe("bad_request");
    expect(await codeOf(c.orchList({ limit: -1 }))).toBe("bad_request");
    expect(await codeOf(c.deadList({ cursor: "not-a-cursor" }))).toBe("bad_request");
    const first = await c.deadList({ limit: 1 });
    expect(await codeOf(c.orchList({ cursor: first.cursor }))).toBe("bad_request");
    expect(await codeOf(c.deadList({ effector: "counter/x", kind: "counter" }))).toBe("bad_request");
    expect(await codeOf(c.orchList({ status: "SLEEPING" as "WAITING" }))).toBe("bad_request");
    expect(await codeOf(c.deadReplay(0))).toBe("bad_request");
  });

  it("reads the node view", async () => {
    const c = client();
    await c.connect();
    const n = await c.nodes();
    expect(n.partitions).toBeGreaterThan(0);
    expect(n.nodes.length).toBeGreaterThanOrEqual(1);
    const node = n.nodes.find((x) => x.kinds.includes("counter"));
    expect(node).toBeDefined();
    expect(node!.partitions.filter((p) => p.kind === "counter").length).toBe(n.partitions);
    expect(typeof n.index_lag).toBe("number");
  });
});
