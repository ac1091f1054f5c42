// In real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): a page of the bundled package sends, is reloaded before
// the ack, and sees the send acked once and the state right; and the live
// view (web/assets) does the same with its send form.

import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { Client } from "../src/index.js";
import { eventually, gateway, GatewayProxy, newClient, unique } from "./helpers.js";

const chromiumPath = "/usr/bin/chromium";
const dir = join(import.meta.dirname, "browser");
const bundle = join(import.meta.dirname, "..", "dist", "effectors-client.js");
const liveView = join(import.meta.dirname, "..", "..", "..", "web", "assets");

type Event = { id: string; status: string; duplicate: boolean; seq?: number; code?: string };

describe.runIf(existsSync(chromiumPath))("in Chromium, a page", () => {
  let browser: Browser;
  let proxy: GatewayProxy;
  let direct: Client;

  beforeAll(async () => {
    if (!existsSync(bundle)) {
      throw new Error(`${bundle} is missing: run npm run build first (npm test does)`);
    }
    proxy = await new GatewayProxy({
      "/page.html": { path: join(dir, "page.html"), type: "text/html" },
      "/page.js": { path: join(dir, "page.js"), type: "text/javascript" },
      "/effectors-client.js": { path: bundle, type: "text/javascript" },
      // The live view, as the gateway serves it (its own copy of the bundle).
      "/": { path: join(liveView, "index.html"), type: "text/html" },
      "/assets/app.js": { path: join(liveView, "app.js"), type: "text/javascript" },
      "/assets/effectors-client.js": { path: join(liveView, "effectors-client.js"), type: "text/javascript" },
      "/assets/style.css": { path: join(liveView, "style.css"), type: "text/css" },
    }).listen();
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
    });
    direct = newClient();
    await direct.connect();
  });

  afterAll(async () => {
    direct?.close();
    await browser?.close();
    await proxy?.close();
  });

  async function open(page: Page): Promise<void> {
    await page.goto(`http://${proxy.host}/page.html?token=${encodeURIComponent(gateway().token)}`);
  }
  const events = (page: Page) => page.evaluate(() => (window as unknown as { events: Event[] }).events);
  const status = (page: Page) => page.evaluate(() => document.body.dataset.status);
  const count = async (ref: string) => ((await direct.state(ref)).state as { count: number }).count;
  const storedOnce = async (ref: string, id: string) =>
    (await direct.query({ effector: ref, box: "mailbox", limit: 1000 })).records.filter((r) => r.id === id).length === 1;

  it("sends while offline, is reloaded, and sees the send acked once when the gateway is back", async () => {
    const ref = `counter/${unique("page")}`;
    await direct.create(ref);
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await open(page);
    await eventually("the page connected", async () => (await status(page)) === "open");

    proxy.offline();
    await eventually("the page sees the drop", async () => (await status(page)) !== "open");
    const id = await page.evaluate((to) => (window as unknown as { sendInc: (t: string, b: number) => Promise<string> }).sendInc(to, 3), ref);
    expect(await page.locator(`li[data-id="${id}"]`).getAttribute("data-sync")).toBe("local_only");

    await page.reload(); // before any ack: the gateway never saw it
    const restored = await page.evaluate(() => (window as unknown as { restored: Promise<unknown> }).restored);
    expect(restored).toEqual([{ id, status: "local_only" }]);
    expect(await page.locator(`li[data-id="${id}"]`).getAttribute("data-sync")).toBe("local_only");

    proxy.online();
    await eventually("the send acked", async () => (await page.locator(`li[data-id="${id}"]`).getAttribute("data-sync")) === "acked");
    const evs = (await events(page)).filter((e) => e.id === id);
    expect(evs.map((e) => e.status)).toEqual(["local_only", "acked"]);
    expect(evs[1].duplicate).toBe(false);
    await eventually("the state", async () => (await count(ref)) === 3);
    expect(await page.evaluate((to) => (window as unknown as { count: (t: string) => Promise<number> }).count(to), ref)).toBe(3);
    await eventually("stored once", () => storedOnce(ref, id));
    // Nothing is left to re-send: a reload finds no send kept.
    await page.reload();
    expect(await page.evaluate(() => (window as unknown as { restored: Promise<unknown> }).restored)).toEqual([]);
    await ctx.close();
  });

  it("sends, is reloaded after the gateway stored it but before the ack, and sees it acked once (a duplicate), counted once", async () => {
    const ref = `counter/${unique("page")}`;
    await direct.create(ref);
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await open(page);
    await eventually("the page connected", async () => (await status(page)) === "open");

    proxy.hold(); // the gateway gets the send; the ack never reaches the page
    const id = await page.evaluate((to) => (window as unknown as { sendInc: (t: string, b: number) => Promise<string> }).sendInc(to, 5), ref);
    await eventually("stored and applied by the gateway's side", async () => (await count(ref)) === 5);
    expect(await page.locator(`li[data-id="${id}"]`).getAttribute("data-sync")).toBe("local_only");

    proxy.online();
    proxy.cut(); // the held ack is lost with the connection
    await page.reload();
    expect(await page.evaluate(() => (window as unknown as { restored: Promise<unknown> }).restored)).toEqual([{ id, status: "local_only" }]);
    await eventually("the re-send acked", async () => (await page.locator(`li[data-id="${id}"]`).getAttribute("data-sync")) === "acked");
    const evs = (await events(page)).filter((e) => e.id === id);
    expect(evs.map((e) => e.status)).toEqual(["local_only", "acked"]);
    expect(evs[1].duplicate).toBe(true);
    expect(await page.locator(`li[data-id="${id}"]`).textContent()).toContain("(stored before)");
    await eventually("stored once", () => storedOnce(ref, id));
    expect(await count(ref)).toBe(5);
    expect(await page.evaluate((to) => (window as unknown as { count: (t: string) => Promise<number> }).count(to), ref)).toBe(5);
    await ctx.close();
  });

  it("the live view keeps a send made offline across a reload and shows it acked once", async () => {
    const ref = `counter/${unique("view")}`;
    await direct.create(ref);
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`http://${proxy.host}/#token=${encodeURIComponent(gateway().token)}`);
    await eventually("the view connected", async () => (await page.locator("#conn").getAttribute("data-state")) === "open");

    proxy.offline();
    await eventually("the view sees the drop", async () => (await page.locator("#conn").getAttribute("data-state")) !== "open");
    await page.fill("#send-to", ref);
    await page.fill("#send-type", "inc");
    await page.fill("#send-payload", '{"by": 4}');
    await page.click("#send-button");
    const li = page.locator("#sends li").first();
    expect(await li.getAttribute("data-sync")).toBe("local_only");
    const id = (await li.getAttribute("data-id"))!;
    expect(id).toMatch(/^ui-[0-9a-f]{24}$/);
    // Kept once IndexedDB has it; then reload, still offline.
    await eventually("the send kept", () =>
      page.evaluate(async () => (await (window as unknown as { effectors: Client }).effectors.pendingSends()).length === 1),
    );
    await page.reload();
    const restored = page.locator(`#sends li[data-id="${id}"]`);
    await eventually("the kept send shown after the reload", async () => (await restored.getAttribute("data-sync")) === "local_only");

    proxy.online();
    await eventually("the send acked", async () => (await restored.getAttribute("data-sync")) === "acked");
    await eventually("the state", async () => (await count(ref)) === 4);
    await eventually("stored once", () => storedOnce(ref, id));
    expect(await restored.textContent()).toContain(`EA_MBOX seq ${(await direct.get(id)).seq}`);
    expect(await page.locator("#sends li").count()).toBe(1);
    expect(errors).toEqual([]);
    await ctx.close();
  });
});
