// Helpers of the tests: the gateway's address, clients on it, a proxy in
// front of it that drops, refuses or holds connections, and polling.

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { inject } from "vitest";
import WebSocket from "ws";

import { Client, type ClientOptions, type RecordJSON, type WebSocketConstructor } from "../src/index.js";

export const gateway = () => inject("gateway");

let seq = 0;
/** A fresh name, unique across runs against the same store. */
export function unique(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}${(++seq).toString(36)}`;
}

/** A client on the gateway (or on url), with the ws package's WebSocket. */
export function newClient(opts: Partial<ClientOptions> = {}): Client {
  const g = gateway();
  return new Client({
    url: `ws://${g.host}/ws`,
    token: g.token,
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    ...opts,
  });
}

/** Polls cond every 20 ms until it holds; fails after timeout ms. */
/** Every record of the query, paged. */
export async function all(c: Client, q: Parameters<Client["query"]>[0]): Promise<RecordJSON[]> {
  const out: RecordJSON[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await c.query({ ...q, cursor, limit: 500 });
    out.push(...page.records);
    if (!page.more) {
      return out;
    }
    cursor = page.cursor;
  }
}

export async function eventually(what: string, cond: () => boolean | Promise<boolean>, timeout = 20_000): Promise<void> {
  const deadline = Date.now() + timeout;
  let last: unknown;
  for (;;) {
    try {
      if (await cond()) {
        return;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

type Mode = "pass" | "offline" | "hold";

interface Proxied {
  client: Socket;
  upstream: Socket;
  held: boolean;
}

/**
 * A proxy in front of the gateway: HTTP GETs of the files given are served
 * from disk, and WebSocket upgrades are forwarded byte for byte to the
 * gateway. Modes: pass; offline (upgrades refused: the gateway is
 * unreachable); hold (what the gateway sends is held back: the gateway gets
 * frames, the client gets nothing of what it answers: those bytes are
 * dropped). cut drops every connection. upstream is the gateway's host:port
 * (default: the one of the global setup).
 */
export class GatewayProxy {
  private server: Server;
  private conns = new Set<Proxied>();
  mode: Mode = "pass";
  /** When each upgrade was attempted (ms). */
  readonly attempts: number[] = [];
  port = 0;

  constructor(
    private readonly files: Record<string, { path: string; type: string }> = {},
    private readonly upstream?: string,
  ) {
    this.server = createServer((req, res) => {
      const f = this.files[new URL(req.url ?? "/", "http://x").pathname];
      if (!f) {
        res.writeHead(404).end("not found");
        return;
      }
      res.writeHead(200, { "content-type": f.type, "cache-control": "no-store" }).end(readFileSync(f.path));
    });
    this.server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => this.upgrade(req, socket, head));
  }

  async listen(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", () => r()));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  private upgrade(req: IncomingMessage, client: Socket, head: Buffer): void {
    this.attempts.push(Date.now());
    if (this.mode === "offline") {
      client.destroy();
      return;
    }
    const [host, port] = (this.upstream ?? gateway().host).split(":");
    const upstream = connect(Number(port), host);
    const c: Proxied = { client, upstream, held: this.mode === "hold" };
    this.conns.add(c);
    const end = () => {
      this.conns.delete(c);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    upstream.on("connect", () => {
      let h = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        h += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      }
      upstream.write(h + "\r\n");
      if (head.length) {
        upstream.write(head);
      }
      client.on("data", (d) => upstream.write(d));
      upstream.on("data", (d) => {
        if (!c.held) {
          client.write(d);
        }
      });
    });
  }

  /** Drops every connection now (what the gateway sent and was held is lost). */
  cut(): void {
    for (const c of this.conns) {
      c.client.destroy();
      c.upstream.destroy();
    }
    this.conns.clear();
  }

  /** Refuses new connections and drops the open ones. */
  offline(): void {
    this.mode = "offline";
    this.cut();
  }

  /** Forwards again. */
  online(): void {
    this.mode = "pass";
  }

  /** Holds back what the gateway sends, on the open connections and new ones. */
  hold(): void {
    this.mode = "hold";
    for (const c of this.conns) {
      c.held = true;
    }
  }

  /** Number of connections open through the proxy. */
  get open(): number {
    return this.conns.size;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
