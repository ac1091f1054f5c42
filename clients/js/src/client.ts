// The client: one WebSocket connection to the gateway, kept open with
// reconnects; acknowledged sends kept in a SendStore until their ack;
// subscriptions resumed from where they stopped; requests.

import { CloseCodes, EffectorsError } from "./errors.js";
import type {
  AckFrame,
  DeadListQuery,
  DeadPage,
  DeadReplayResult,
  EffectorPage,
  EffectorRef,
  KindInfo,
  NodesResult,
  Orchestration,
  OrchListQuery,
  OrchPage,
  OutRecord,
  Positions,
  Query,
  RecordJSON,
  RecordPage,
  ServerFrame,
  StateDocument,
  SubscribedFrame,
  SubscribeSpec,
  Topic,
  TopicFrames,
  WelcomeFrame,
} from "./frames.js";
import { MemoryStore, type PendingSend, type SendStore } from "./store.js";

/** What the client needs of a WebSocket: the browser's, Node 22's global one, or the `ws` package's. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: any) => void) | null;
}

/** A WebSocket constructor. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Options of {@link Client}. */
export interface ClientOptions {
  /** The gateway's WebSocket URL, such as `ws://127.0.0.1:9466/ws`. */
  url: string;
  /** The gateway's token, sent in an `auth` frame first; a function is asked at every connect. */
  token?: string | (() => string | undefined);
  /** The WebSocket implementation; default: the global `WebSocket` (browsers, Node 22+). In Node 20 pass the `ws` package's. */
  WebSocket?: WebSocketConstructor;
  /** Where unacknowledged sends are kept; default a {@link MemoryStore}. Use IndexedDBStore in a browser, FileStore in Node. */
  store?: SendStore;
  /** Prefix of the record ids the client makes; default `js-`. */
  idPrefix?: string;
  /** Reconnect backoff: the first delay and the cap, in ms (defaults 250 and 10000); each delay is jittered (50–100 % of it). */
  reconnect?: { initialDelay?: number; maxDelay?: number };
  /** How long a request waits for the connection and then for its answer, in ms; default 30000. */
  requestTimeout?: number;
  /** A ping every this many ms while connected, and a connection with no pong within `requestTimeout` is dropped and made anew; default 25000, 0 turns it off. */
  pingInterval?: number;
}

/** The connection's state. */
export type Status =
  /** Not started: call connect. */
  | "idle"
  /** Opening the WebSocket, authorizing, waiting for welcome. */
  | "connecting"
  /** Welcomed: requests, sends and subscriptions flow. */
  | "open"
  /** The connection dropped; the next attempt is scheduled (backoff). */
  | "reconnecting"
  /** The gateway refused the token (close 4401): no more attempts until connect is called again. */
  | "unauthorized"
  /** The client was closed. */
  | "closed";

/** The sync state of a send: kept locally until the gateway stored it (`acked`) or refused it. */
export type SendStatus = "local_only" | "acked" | "refused";

/** What the `send` event tells. */
export interface SendUpdate {
  id: string;
  to: EffectorRef;
  record: OutRecord & { id: string };
  status: SendStatus;
  /** The ack, once `acked`. */
  ack?: AckFrame;
  /** Why it was refused, once `refused`. */
  error?: EffectorsError;
}

/** Events of {@link Client.on}. */
export interface ClientEvents {
  status: Status;
  welcome: WelcomeFrame;
  send: SendUpdate;
  /** An error with no call to reject: an error frame answering nothing, a store failure, a subscription handler that threw. */
  error: EffectorsError | Error;
}

/** A send: its id at once, then its ack. */
export interface SendHandle {
  /** The record id. */
  readonly id: string;
  readonly to: EffectorRef;
  readonly record: OutRecord & { id: string };
  /** local_only until the ack, then acked (or refused). */
  readonly status: SendStatus;
  /** Resolves once the send is kept in the store: from then on it survives a reload or a restart. */
  readonly saved: Promise<void>;
  /**
   * Resolves with the ack (`duplicate` when it had been stored before); rejects with an
   * {@link EffectorsError}: a gateway code when refused (`conflict`, `not_found`, …; nothing was
   * stored), `closed` when the client is closed first (the send stays in the store).
   */
  readonly acked: Promise<AckFrame>;
}

/** The state of a {@link Subscription}. */
export type SubscriptionStatus = "pending" | "active" | "failed" | "closed";

/** Options of {@link Client.subscribe}. */
export interface SubscribeOptions {
  /** Called when the subscription is refused or fails on its own (then it stops: see {@link Subscription.restart}). */
  onError?: (err: EffectorsError) => void;
}

/** Where a subscription resumes: one of `from`, `cursor`, `positions`. */
export interface SubscriptionPosition {
  /** The next stream sequence or revision (the last delivered + 1); absent: from now. */
  from?: number;
  /** A `records` subscription's: the `cursor` of the last `records` frame. */
  cursor?: string;
  /**
   * A kind-wide `outbox` or `state` subscription's: the next sequence of each outbox stream, or
   * revision of each state bucket, it has a position in (a copy: keep it, and start a later
   * subscription from it with `positions` in the spec).
   */
  positions?: Positions;
}

/** A subscription: resumed after every reconnect from the frame after the last one delivered. */
export interface Subscription<T extends Topic = Topic> {
  /** Its `sub` name on the wire. */
  readonly name: string;
  readonly spec: SubscribeSpec & { topic: T };
  readonly status: SubscriptionStatus;
  /**
   * The resume point: the next stream sequence or revision (`from`), the `cursor` of records,
   * or, for a kind-wide `outbox` or `state` subscription, the next one of each stream or bucket
   * (`positions`, from its `subscribed` frame and the `stream`/`bucket` of its frames).
   */
  readonly position: SubscriptionPosition;
  /** Why it failed, when it did. */
  readonly error?: EffectorsError;
  /** Ends it. */
  close(): Promise<void>;
  /** Subscribes again from its position after it failed. */
  restart(): void;
}

const refPattern = /^[A-Za-z0-9_-]{1,128}\/[A-Za-z0-9_-]{1,128}$/;

interface Pending {
  resolve: (f: ServerFrame) => void;
  reject: (err: EffectorsError) => void;
  timer?: ReturnType<typeof setTimeout>;
  send?: boolean; // a send's answer: not rejected when the connection drops
}

interface SendEntry {
  p: PendingSend;
  status: SendStatus;
  saved: boolean;
  conn: number; // the connection it was last sent on
  handle: SendHandle;
  resolve: (ack: AckFrame) => void;
  reject: (err: EffectorsError) => void;
  retry?: ReturnType<typeof setTimeout>;
}

interface Waiter {
  resolve: (w: WelcomeFrame) => void;
  reject: (err: EffectorsError) => void;
}

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: EffectorsError) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: EffectorsError) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // the caller may never look
  return { promise, resolve, reject };
}

function randomHex(bytes: number): string {
  const a = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * A client of the effectors gateway.
 *
 * ```ts
 * const client = new Client({ url: "ws://127.0.0.1:9466/ws", store: new IndexedDBStore() });
 * await client.connect();
 * const s = client.send("counter/c1", { type: "inc", payload: { by: 1 } });
 * await s.acked;
 * ```
 */
export class Client {
  private readonly opts: Required<Omit<ClientOptions, "token" | "WebSocket" | "store" | "reconnect">>;
  private readonly WS: WebSocketConstructor;
  private readonly store: SendStore;
  private readonly initialDelay: number;
  private readonly maxDelay: number;
  private token: ClientOptions["token"];

  private st: Status = "idle";
  private ws: WebSocketLike | null = null;
  private welcomed: WelcomeFrame | null = null;
  private conn = 0; // incremented at every welcome
  private attempt = 0;
  private reqSeq = 0;
  private subSeq = 0;
  private order = 0;
  private reconnectTimer?: ReturnType<typeof setTimeout>;
  private welcomeTimer?: ReturnType<typeof setTimeout>;
  private pingTimer?: ReturnType<typeof setInterval>;
  private loaded?: Promise<void>;

  private readonly pending = new Map<string, Pending>();
  private readonly subs = new Map<string, SubscriptionImpl<Topic>>();
  private readonly sends = new Map<string, SendEntry>();
  private readonly waiters = new Set<Waiter>();
  private readonly listeners = new Map<keyof ClientEvents, Set<(v: any) => void>>();

  constructor(options: ClientOptions) {
    if (!options || typeof options.url !== "string" || options.url === "") {
      throw new EffectorsError("invalid", "Client: options.url is required, such as ws://127.0.0.1:9466/ws");
    }
    const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) {
      throw new EffectorsError("invalid", "Client: no WebSocket here: pass options.WebSocket (in Node 20, the ws package's WebSocket)");
    }
    this.WS = WS;
    this.store = options.store ?? new MemoryStore();
    this.token = options.token;
    this.initialDelay = options.reconnect?.initialDelay ?? 250;
    this.maxDelay = options.reconnect?.maxDelay ?? 10_000;
    this.opts = {
      url: options.url,
      idPrefix: options.idPrefix ?? "js-",
      requestTimeout: options.requestTimeout ?? 30_000,
      pingInterval: options.pingInterval ?? 25_000,
    };
  }

  // ---- connection ----------------------------------------------------------

  /** The connection's state. */
  get status(): Status {
    return this.st;
  }

  /** The welcome frame of the open connection (undefined while not open). */
  get welcome(): WelcomeFrame | undefined {
    return this.welcomed ?? undefined;
  }

  /** The WebSocket in use, for diagnostics (closing it is a dropped connection: the client reconnects). */
  get socket(): WebSocketLike | null {
    return this.ws;
  }

  /** Sets the token used from the next connect on. */
  setToken(token: ClientOptions["token"]): void {
    this.token = token;
  }

  /**
   * Starts connecting (and reconnecting whenever the connection drops), and
   * resolves with the welcome frame once connected. It rejects with
   * `unauthorized` when the gateway refuses the token (call connect again
   * after {@link setToken}), `closed` when the client is closed first.
   */
  connect(): Promise<WelcomeFrame> {
    if (this.st === "closed") {
      return Promise.reject(new EffectorsError("closed", "connect: the client is closed"));
    }
    if (this.st === "open" && this.welcomed) {
      return Promise.resolve(this.welcomed);
    }
    const p = new Promise<WelcomeFrame>((resolve, reject) => this.waiters.add({ resolve, reject }));
    if (this.st === "idle" || this.st === "unauthorized") {
      this.attempt = 0;
      this.setStatus("connecting");
      this.ensureLoaded().then(
        () => {
          if (this.st === "connecting" && !this.ws) {
            this.open();
          }
        },
        (err) => this.emit("error", err),
      );
    }
    return p;
  }

  /**
   * Closes the connection and stops reconnecting. Sends not acknowledged
   * stay in the store (a new client re-sends them); their `acked` promises
   * and every request in flight reject with `closed`.
   */
  close(): void {
    if (this.st === "closed") {
      return;
    }
    this.setStatus("closed");
    clearTimeout(this.reconnectTimer);
    this.stopTimers();
    const ws = this.ws;
    this.ws = null;
    this.welcomed = null;
    if (ws) {
      this.detach(ws);
      try {
        ws.close(1000, "client closed");
      } catch {
        // already closing
      }
    }
    const err = new EffectorsError("closed", "the client is closed");
    this.failPending(err);
    for (const w of this.waiters) {
      w.reject(err);
    }
    this.waiters.clear();
    for (const e of this.sends.values()) {
      clearTimeout(e.retry);
      e.reject(new EffectorsError("closed", `send ${e.p.id} to ${e.p.to}: the client is closed before the ack; the send stays in the store`));
    }
  }

  /** Calls fn on every event of this name; returns what stops it. */
  on<E extends keyof ClientEvents>(event: E, fn: (v: ClientEvents[E]) => void): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(fn);
    return () => set.delete(fn);
  }

  private emit<E extends keyof ClientEvents>(event: E, v: ClientEvents[E]): void {
    for (const fn of this.listeners.get(event) ?? []) {
      try {
        fn(v);
      } catch (err) {
        if (event !== "error") {
          this.emit("error", err instanceof Error ? err : new Error(String(err)));
        }
      }
    }
  }

  private setStatus(s: Status): void {
    if (this.st !== s) {
      this.st = s;
      this.emit("status", s);
    }
  }

  private ensureLoaded(): Promise<void> {
    if (!this.loaded) {
      this.loaded = this.store.list().then((list) => {
        list.sort((a, b) => a.order - b.order || a.created - b.created);
        for (const p of list) {
          if (!this.sends.has(p.id)) {
            this.addEntry(p, true);
          }
          this.order = Math.max(this.order, p.order);
        }
      });
      this.loaded.catch(() => {
        this.loaded = undefined;
      });
    }
    return this.loaded;
  }

  private open(): void {
    let ws: WebSocketLike;
    try {
      ws = new this.WS(this.opts.url);
    } catch (err) {
      const e = new EffectorsError("invalid", `connect to ${this.opts.url}: ${(err as Error).message}`);
      this.setStatus("closed");
      for (const w of this.waiters) {
        w.reject(e);
      }
      this.waiters.clear();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      const t = typeof this.token === "function" ? this.token() : this.token;
      if (t) {
        ws.send(JSON.stringify({ type: "auth", token: t }));
      }
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) {
        return;
      }
      let f: ServerFrame;
      try {
        const text = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data as ArrayBuffer | Uint8Array);
        f = JSON.parse(text) as ServerFrame;
      } catch {
        this.emit("error", new Error("a frame from the gateway is not JSON"));
        return;
      }
      this.onFrame(f);
    };
    ws.onerror = () => undefined; // onclose follows with the code
    ws.onclose = (ev) => {
      if (this.ws === ws) {
        this.dropped(ev.code, ev.reason);
      }
    };
    // No welcome in time (an auth frame lost, a gateway that hangs): drop it.
    this.welcomeTimer = setTimeout(() => this.abandon(ws, "no welcome frame in time"), this.opts.requestTimeout);
  }

  private detach(ws: WebSocketLike): void {
    ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
  }

  // abandon drops a connection that does not answer without waiting for a
  // close handshake that may never come.
  private abandon(ws: WebSocketLike, why: string): void {
    if (this.ws !== ws) {
      return;
    }
    this.detach(ws);
    try {
      ws.close(4000, why);
    } catch {
      // closing already
    }
    this.dropped(4000, why);
  }

  private stopTimers(): void {
    clearTimeout(this.welcomeTimer);
    clearInterval(this.pingTimer);
    this.welcomeTimer = this.pingTimer = undefined;
  }

  // failPending rejects the requests in flight with err; the answers of
  // sends in flight are forgotten (the sends stay kept, and are sent again).
  private failPending(err: EffectorsError): void {
    for (const [req, p] of this.pending) {
      clearTimeout(p.timer);
      if (!p.send) {
        p.reject(err);
      }
      this.pending.delete(req);
    }
  }

  // dropped handles the end of the connection.
  private dropped(code: number, reason: string): void {
    this.ws = null;
    this.welcomed = null;
    this.stopTimers();
    for (const e of this.sends.values()) {
      clearTimeout(e.retry);
      e.retry = undefined;
    }
    for (const s of this.subs.values()) {
      s.disconnected();
    }
    const why = `connection closed (${code}${reason ? ": " + reason : ""})`;
    if (code === CloseCodes.unauthorized) {
      const err = new EffectorsError("unauthorized", reason || "unauthorized", { fromGateway: true });
      this.failPending(err);
      this.emit("error", err); // before the status, so that a status listener can know why
      this.setStatus("unauthorized");
      for (const w of this.waiters) {
        w.reject(err);
      }
      this.waiters.clear();
      return;
    }
    this.failPending(new EffectorsError("disconnected", `${why} before the answer`));
    const base = Math.min(this.maxDelay, this.initialDelay * 2 ** Math.min(this.attempt, 30));
    const delay = base * (0.5 + Math.random() * 0.5);
    this.attempt++;
    this.setStatus("reconnecting");
    this.reconnectTimer = setTimeout(() => {
      if (this.st === "reconnecting") {
        this.setStatus("connecting");
        this.open();
      }
    }, delay);
  }

  private onWelcome(f: WelcomeFrame): void {
    clearTimeout(this.welcomeTimer);
    this.welcomed = f;
    this.conn++;
    this.attempt = 0;
    this.setStatus("open");
    for (const s of this.subs.values()) {
      s.resume();
    }
    const entries = [...this.sends.values()].sort((a, b) => a.p.order - b.p.order);
    for (const e of entries) {
      this.transmit(e); // once per connection, with the same id
    }
    if (this.opts.pingInterval > 0) {
      this.pingTimer = setInterval(() => this.pingOnce(), this.opts.pingInterval);
    }
    this.emit("welcome", f);
    for (const w of this.waiters) {
      w.resolve(f);
    }
    this.waiters.clear();
  }

  private pingOnce(): void {
    const ws = this.ws;
    if (!ws || this.st !== "open") {
      return;
    }
    this.request<unknown>({ type: "ping" }).catch((err: EffectorsError) => {
      if (err.code === "timeout") {
        this.abandon(ws, "no pong in time");
      }
    });
  }

  private onFrame(f: ServerFrame): void {
    switch (f.type) {
      case "welcome":
        this.onWelcome(f);
        return;
      case "result":
      case "ack":
      case "pong":
        this.settle(f.req, f, null);
        return;
      case "error": {
        const err = new EffectorsError(f.code, f.error, { fromGateway: true, req: f.req, sub: f.sub });
        if (f.req && this.pending.has(f.req)) {
          this.settle(f.req, f, err);
          return;
        }
        if (f.sub && this.subs.has(f.sub)) {
          this.subs.get(f.sub)!.failed(err);
          return;
        }
        this.emit("error", err);
        return;
      }
      case "subscribed":
        this.subs.get(f.sub)?.subscribed(f);
        return;
      case "unsubscribed":
        if (f.req) {
          this.settle(f.req, f, null);
        }
        return;
    }
    const sub = (f as { sub?: string }).sub;
    if (sub) {
      this.subs.get(sub)?.deliver(f as TopicFrames[Topic]);
    }
  }

  private settle(req: string | undefined, f: ServerFrame, err: EffectorsError | null): void {
    if (!req) {
      return;
    }
    const p = this.pending.get(req);
    if (!p) {
      return;
    }
    this.pending.delete(req);
    clearTimeout(p.timer);
    if (err) {
      p.reject(err);
    } else {
      p.resolve(f);
    }
  }

  private nextReq(): string {
    return "r" + ++this.reqSeq;
  }

  // write sends a frame on the open connection; false when there is none.
  private write(frame: object): boolean {
    const ws = this.ws;
    if (!ws || this.st !== "open") {
      return false;
    }
    ws.send(JSON.stringify(frame));
    return true;
  }

  private waitOpen(timeout: number): Promise<void> {
    if (this.st === "open") {
      return Promise.resolve();
    }
    if (this.st === "closed") {
      return Promise.reject(new EffectorsError("closed", "the client is closed"));
    }
    if (this.st === "unauthorized") {
      return Promise.reject(new EffectorsError("unauthorized", "the gateway refused the token: set another and connect again"));
    }
    if (this.st === "idle") {
      return Promise.reject(new EffectorsError("disconnected", "not connected: call connect first"));
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new EffectorsError("timeout", `not connected within ${timeout} ms (${this.st})`));
      }, timeout);
      this.waiters.add(w);
    });
  }

  /**
   * Sends a request frame (a fresh `req` is added) once connected, and
   * resolves with its `result`. It rejects with the gateway's error code,
   * or `timeout`, `disconnected` (the connection dropped before the answer:
   * the request may have been carried out), `unauthorized` or `closed`.
   */
  async request<T>(frame: { type: string } & Record<string, unknown>, opts: { timeout?: number } = {}): Promise<T> {
    const timeout = opts.timeout ?? this.opts.requestTimeout;
    const started = Date.now();
    await this.waitOpen(timeout);
    const req = this.nextReq();
    const f = await new Promise<ServerFrame>((resolve, reject) => {
      const p: Pending = { resolve, reject };
      p.timer = setTimeout(
        () => {
          this.pending.delete(req);
          reject(new EffectorsError("timeout", `${frame.type}: no answer within ${timeout} ms`, { req }));
        },
        Math.max(1, timeout - (Date.now() - started)),
      );
      this.pending.set(req, p);
      if (!this.write({ ...frame, req })) {
        this.pending.delete(req);
        clearTimeout(p.timer);
        reject(new EffectorsError("disconnected", `${frame.type}: not connected`, { req }));
      }
    });
    return (f as { result?: T }).result as T;
  }

  // ---- sends ---------------------------------------------------------------

  /** A new record id: the prefix and 24 random hex digits. */
  newId(): string {
    return this.opts.idPrefix + randomHex(12);
  }

  /**
   * Sends a record to the effector `to` (`<kind>/<id>`). The record gets an
   * id (`record.id`, or a new one), is kept in the store (`local_only`)
   * before it goes out, and is sent once on every connection until it is
   * acknowledged: a reload or a restart re-sends it with the same id, and
   * the gateway stores it once. Throws `invalid` at once for a `to` that
   * cannot be an effector.
   */
  send(to: EffectorRef, record: OutRecord = {}): SendHandle {
    if (this.st === "closed") {
      throw new EffectorsError("closed", "send: the client is closed");
    }
    if (typeof to !== "string" || !refPattern.test(to)) {
      throw new EffectorsError("invalid", `send: to ${JSON.stringify(to)} is not an effector: want "<kind>/<id>", each [A-Za-z0-9_-]{1,128}`);
    }
    const id = record.id ?? this.newId();
    if (this.sends.has(id)) {
      throw new EffectorsError("invalid", `send: record id ${id} is already being sent; choose another id`);
    }
    const now = Date.now();
    this.order = Math.max(this.order + 1, now * 1000);
    const p: PendingSend = { id, to, record: { ...record, id }, created: now, order: this.order };
    const e = this.addEntry(p, false);
    const saved = this.store.put(p).then(
      () => {
        e.saved = true;
        this.transmit(e);
      },
      (err: unknown) => {
        // Not kept: send it anyway (it lives as long as this client).
        e.saved = true;
        this.emit("error", new Error(`send ${id}: the store did not keep it (${(err as Error).message}); sending it without`));
        this.transmit(e);
        throw err;
      },
    );
    saved.catch(() => undefined);
    Object.defineProperty(e.handle, "saved", { value: saved });
    return e.handle;
  }

  /** Handles of every send not yet acknowledged, its earlier ones (from the store) included, in order. */
  async pendingSends(): Promise<SendHandle[]> {
    await this.ensureLoaded();
    return [...this.sends.values()].sort((a, b) => a.p.order - b.p.order).map((e) => e.handle);
  }

  private addEntry(p: PendingSend, saved: boolean): SendEntry {
    const d = deferred<AckFrame>();
    const e: SendEntry = { p, status: "local_only", saved, conn: 0, resolve: d.resolve, reject: d.reject, handle: undefined! };
    e.handle = {
      id: p.id,
      to: p.to,
      record: p.record,
      get status() {
        return e.status;
      },
      saved: Promise.resolve(),
      acked: d.promise,
    };
    this.sends.set(p.id, e);
    this.emit("send", { id: p.id, to: p.to, record: p.record, status: "local_only" });
    return e;
  }

  // transmit sends e once on the open connection.
  private transmit(e: SendEntry): void {
    if (!e.saved || e.status !== "local_only" || this.st !== "open" || e.conn === this.conn || this.sends.get(e.p.id) !== e) {
      return;
    }
    const req = this.nextReq();
    e.conn = this.conn;
    this.pending.set(req, {
      send: true,
      resolve: (f) => void this.acked(e, f as AckFrame),
      reject: (err) => this.refused(e, err),
    });
    if (!this.write({ type: "send", req, to: e.p.to, record: e.p.record })) {
      this.pending.delete(req);
      e.conn = 0;
    }
  }

  private async acked(e: SendEntry, ack: AckFrame): Promise<void> {
    if (e.status !== "local_only") {
      return;
    }
    e.status = "acked";
    this.sends.delete(e.p.id);
    try {
      await this.store.delete(e.p.id);
    } catch (err) {
      this.emit("error", new Error(`send ${e.p.id}: acked, but the store did not forget it (${(err as Error).message}); it will be re-sent and acked as a duplicate`));
    }
    e.resolve(ack);
    this.emit("send", { id: e.p.id, to: e.p.to, record: e.p.record, status: "acked", ack });
  }

  private refused(e: SendEntry, err: EffectorsError): void {
    if (e.status !== "local_only") {
      return;
    }
    if (err.code === "unavailable" || err.code === "timeout") {
      // Not stored: the same id again, after a while, on this connection
      // (or at the next one).
      const conn = this.conn;
      const delay = this.initialDelay * 4 * (0.5 + Math.random() * 0.5);
      clearTimeout(e.retry);
      e.retry = setTimeout(() => {
        if (this.conn === conn) {
          e.conn = 0;
          this.transmit(e);
        }
      }, delay);
      return;
    }
    e.status = "refused";
    this.sends.delete(e.p.id);
    this.store.delete(e.p.id).catch((se: Error) => this.emit("error", se));
    e.reject(err);
    this.emit("send", { id: e.p.id, to: e.p.to, record: e.p.record, status: "refused", error: err });
  }

  // ---- subscriptions ---------------------------------------------------------

  /**
   * Subscribes to a topic; onFrame gets its frames in order. After a
   * reconnect the subscription is sent again from the frame after the last
   * one delivered (`from` = last seq or revision + 1, or the last `cursor`;
   * a kind-wide `outbox` or `state` subscription with `positions`, the last
   * seq or revision + 1 of each stream or bucket): no frame is missed, none
   * comes twice. Throws `invalid` at once for `positions` on another topic,
   * with `from`, or with a position that is not a whole number from 1.
   */
  subscribe<S extends SubscribeSpec>(spec: S, onFrame: (f: TopicFrames[S["topic"]]) => void, opts: SubscribeOptions = {}): Subscription<S["topic"]> {
    if (this.st === "closed") {
      throw new EffectorsError("closed", "subscribe: the client is closed");
    }
    checkPositions(spec);
    const name = "s" + ++this.subSeq;
    const s = new SubscriptionImpl<S["topic"]>(this, name, spec as SubscribeSpec & { topic: S["topic"] }, onFrame, opts);
    this.subs.set(name, s as unknown as SubscriptionImpl<Topic>);
    if (this.st === "open") {
      s.resume();
    }
    return s;
  }

  /** @internal */
  _write(frame: object): boolean {
    return this.write(frame);
  }

  /** @internal */
  _isOpen(): boolean {
    return this.st === "open";
  }

  /** @internal */
  _forget(name: string): void {
    this.subs.delete(name);
  }

  /** @internal */
  _error(err: Error): void {
    this.emit("error", err);
  }

  // ---- requests ------------------------------------------------------------

  /** The state document of an effector. */
  state(effector: EffectorRef): Promise<StateDocument> {
    return this.request<StateDocument>({ type: "state", effector });
  }

  /** Creates an effector, with an initial state or the kind's; resolves with its state document (`exists` if it does). */
  create(effector: EffectorRef, state?: unknown): Promise<StateDocument> {
    return this.request<StateDocument>(state === undefined ? { type: "create", effector } : { type: "create", effector, state });
  }

  /** Terminates an effector; resolves with its state document, TERMINATED. */
  terminate(effector: EffectorRef): Promise<StateDocument> {
    return this.request<StateDocument>({ type: "terminate", effector });
  }

  /** The kinds nodes host. */
  async kinds(): Promise<KindInfo[]> {
    return (await this.request<{ kinds: KindInfo[] }>({ type: "kinds" })).kinds;
  }

  /** A page of the effectors of a kind. */
  effectors(q: { kind: string; status?: string; owner?: string; limit?: number; cursor?: string }): Promise<EffectorPage> {
    return this.request<EffectorPage>({ type: "effectors", ...q });
  }

  /** A page of records from the record store. */
  query(query: Query): Promise<RecordPage> {
    return this.request<RecordPage>({ type: "query", query: query as Record<string, unknown> });
  }

  /** One record by id (`not_found` when the store has none). */
  get(id: string): Promise<RecordJSON> {
    return this.request<RecordJSON>({ type: "get", id });
  }

  /** Starts an orchestration; resolves with its id. */
  async orchStart(name: string, input?: unknown): Promise<string> {
    const frame: { type: string } & Record<string, unknown> = { type: "orch.start", name };
    if (input !== undefined) {
      frame.input = input;
    }
    return (await this.request<{ id: string }>(frame)).id;
  }

  /** The status of an orchestration. */
  orchStatus(id: string): Promise<Orchestration> {
    return this.request<Orchestration>({ type: "orch.status", id });
  }

  /** Gives input to an orchestration waiting for it (`not_waiting`, `finished` otherwise). */
  orchInput(id: string, input: unknown): Promise<{ id: string; status: string }> {
    return this.request({ type: "orch.input", id, input });
  }

  /** Cancels an orchestration (`finished` when it is over). */
  orchCancel(id: string): Promise<{ id: string; status: string }> {
    return this.request({ type: "orch.cancel", id });
  }

  /**
   * A page of orchestrations, filtered and paged by the gateway (a user's own; an admin's all or `owner`'s).
   * Errors: `bad_request` (a bad field, cursor or limit), `forbidden` (a user naming another owner).
   */
  orchList(q: OrchListQuery = {}): Promise<OrchPage> {
    return this.request<OrchPage>({ type: "orch.list", ...q });
  }

  /**
   * A page of dead letters, filtered and paged by the gateway (a user's own; an admin's all or `owner`'s).
   * Errors: `bad_request` (a bad field, cursor or limit), `forbidden` (a user naming another owner).
   */
  deadList(q: DeadListQuery = {}): Promise<DeadPage> {
    return this.request<DeadPage>({ type: "dead.list", ...q });
  }

  /**
   * Sends the record of the dead letter at `seq` again, as a new record caused by the original.
   * Errors: `not_found` (no dead letter at seq, or its effector is gone), `forbidden`, `bad_request`, `terminated`.
   */
  deadReplay(seq: number): Promise<DeadReplayResult> {
    return this.request<DeadReplayResult>({ type: "dead.replay", seq });
  }

  /** Deletes the dead letter at `seq` (`not_found` when it is not there, `forbidden` when another user's). */
  deadDiscard(seq: number): Promise<{ seq: number; discarded: true }> {
    return this.request<{ seq: number; discarded: true }>({ type: "dead.discard", seq });
  }

  /** Nodes, the partitions each reads with their counts, and the index lag (admins; a user gets `forbidden`). */
  nodes(): Promise<NodesResult> {
    return this.request<NodesResult>({ type: "nodes" });
  }

  /** A round trip to the gateway. */
  async ping(): Promise<void> {
    await this.request({ type: "ping" });
  }
}

// kindWide reports whether spec is a kind-wide outbox or state
// subscription: one that follows several streams (buckets) at once with
// stream groups, and resumes from a position per stream (bucket).
function kindWide(spec: SubscribeSpec): boolean {
  return (spec.topic === "outbox" || spec.topic === "state") && "kind" in spec && spec.kind !== undefined;
}

// checkPositions refuses the positions of a spec the gateway would refuse
// them with, before anything is sent.
function checkPositions(spec: SubscribeSpec): void {
  const { positions, from } = spec as { positions?: unknown; from?: number };
  if (positions === undefined) {
    return;
  }
  if (!kindWide(spec)) {
    throw new EffectorsError("invalid", `subscribe: "positions" is for a kind-wide outbox or state subscription ({topic, kind, positions}); topic ${spec.topic} of one stream resumes with "from"`);
  }
  if (from) {
    throw new EffectorsError("invalid", `subscribe: give "from" or "positions", not both`);
  }
  if (positions === null || typeof positions !== "object" || Array.isArray(positions)) {
    throw new EffectorsError("invalid", `subscribe: "positions" must be an object of stream (or bucket) to the next sequence (revision)`);
  }
  for (const [name, at] of Object.entries(positions)) {
    if (!Number.isSafeInteger(at) || (at as number) < 1) {
      throw new EffectorsError("invalid", `subscribe: position of ${JSON.stringify(name)} is ${JSON.stringify(at)}: want a whole number from 1 (the last seq or revision received + 1)`);
    }
  }
}

class SubscriptionImpl<T extends Topic> implements Subscription<T> {
  status: SubscriptionStatus = "pending";
  error?: EffectorsError;
  // Where it resumes: from (one stream or bucket), cursor (records), or,
  // once known, positions (kind-wide outbox and state: the next seq or
  // revision of each stream or bucket; only ever moved forward).
  private from?: number;
  private cursor?: string;
  private positions?: Positions;
  private readonly kindWide: boolean;

  constructor(
    private readonly client: Client,
    readonly name: string,
    readonly spec: SubscribeSpec & { topic: T },
    private readonly onFrame: (f: TopicFrames[T]) => void,
    private readonly opts: SubscribeOptions,
  ) {
    const s = spec as { from?: number; cursor?: string; positions?: Positions };
    this.kindWide = kindWide(spec);
    this.from = s.from;
    this.cursor = s.cursor;
    if (this.kindWide && s.positions) {
      this.positions = { ...s.positions };
    }
  }

  get position(): SubscriptionPosition {
    if (this.spec.topic === "records") {
      return { cursor: this.cursor };
    }
    if (this.positions) {
      return { positions: { ...this.positions } };
    }
    return { from: this.from };
  }

  resume(): void {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    this.status = "pending";
    const frame: Record<string, unknown> = { ...this.spec, type: "subscribe", sub: this.name };
    delete frame.from;
    delete frame.cursor;
    delete frame.positions;
    if (this.positions) {
      frame.positions = { ...this.positions };
    } else if (this.from) {
      frame.from = this.from;
    }
    if (this.cursor) {
      frame.cursor = this.cursor;
    }
    this.client._write(frame);
  }

  subscribed(f: SubscribedFrame): void {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    if (this.kindWide && f.positions) {
      // Where each stream starts: a subscription from now resumes from
      // there even before its first frame, and names every stream.
      for (const [name, at] of Object.entries(f.positions)) {
        this.advance(name, at);
      }
    }
    if (this.status === "pending") {
      this.status = "active";
    }
  }

  disconnected(): void {
    if (this.status === "active") {
      this.status = "pending";
    }
  }

  // advance moves the position of stream (bucket) name to next, forward
  // only: false when next is not past it (a frame delivered before).
  private advance(name: string, next: number): boolean {
    const at = this.positions?.[name];
    if (at !== undefined && next <= at) {
      return false;
    }
    (this.positions ??= {})[name] = next;
    return true;
  }

  deliver(f: TopicFrames[T]): void {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    switch (f.type) {
      case "record":
      case "dead": {
        // A gateway older than positions names no stream: from, as before.
        const stream = f.type === "record" ? f.stream : undefined;
        if (this.kindWide && stream) {
          if (!this.advance(stream, f.seq + 1)) {
            return; // delivered before
          }
          break;
        }
        if (this.from && f.seq < this.from) {
          return; // delivered before
        }
        this.from = f.seq + 1;
        break;
      }
      case "state":
      case "orchestration": {
        const bucket = f.type === "state" ? f.bucket : undefined;
        if (this.kindWide && bucket) {
          if (!this.advance(bucket, f.revision + 1)) {
            return;
          }
          break;
        }
        if (this.from && f.revision < this.from) {
          return;
        }
        this.from = f.revision + 1;
        break;
      }
      case "records":
        if (f.cursor) {
          this.cursor = f.cursor;
        }
        break;
    }
    try {
      this.onFrame(f);
    } catch (err) {
      this.client._error(err instanceof Error ? err : new Error(String(err)));
    }
  }

  failed(err: EffectorsError): void {
    if (this.status === "closed") {
      return;
    }
    this.status = "failed";
    this.error = err;
    if (this.opts.onError) {
      this.opts.onError(err);
    } else {
      this.client._error(err);
    }
  }

  restart(): void {
    if (this.status !== "failed") {
      return;
    }
    this.status = "pending";
    this.error = undefined;
    if (this.client._isOpen()) {
      this.resume();
    }
  }

  async close(): Promise<void> {
    if (this.status === "closed") {
      return;
    }
    const was = this.status;
    this.status = "closed";
    this.client._forget(this.name);
    if (was === "failed" || !this.client._isOpen()) {
      return;
    }
    try {
      await this.client.request({ type: "unsubscribe", sub: this.name });
    } catch {
      // gone with the connection, or ended on its own already
    }
  }
}
