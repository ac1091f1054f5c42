// @effectors/client, bundled from clients/js/src by clients/js/scripts/bundle.mjs (npm run build).
// Do not edit: change clients/js/src and run npm run build in clients/js.

// src/errors.ts
var GatewayCodes = [
  "bad_frame",
  "unknown_type",
  "bad_request",
  "not_found",
  "forbidden",
  "terminated",
  "exists",
  "conflict",
  "undeclared_type",
  "no_host",
  "not_waiting",
  "finished",
  "unavailable",
  "too_many_subscriptions",
  "duplicate_subscription",
  "unknown_subscription",
  "subscription_failed",
  "internal"
];
var EffectorsError = class extends Error {
  /** What went wrong, for programs: compare this, not the message. */
  code;
  /** True when the gateway sent it (an error frame); false when the client made it. */
  fromGateway;
  /** The request name (`req`) the error answers, when it answers one. */
  req;
  /** The subscription name (`sub`) the error belongs to, when it does. */
  sub;
  constructor(code, message, opts = {}) {
    super(message);
    this.name = "EffectorsError";
    this.code = code;
    this.fromGateway = opts.fromGateway ?? false;
    this.req = opts.req;
    this.sub = opts.sub;
  }
};
function isEffectorsError(err, ...codes) {
  if (!(err instanceof EffectorsError)) {
    return false;
  }
  return codes.length === 0 || codes.includes(err.code);
}
var CloseCodes = {
  /** No token, a wrong token, or no auth frame in time. */
  unauthorized: 4401,
  /** Frames waited over 10 s for the client to read. */
  slowReader: 4408
};

// src/store.ts
var MemoryStore = class {
  sends = /* @__PURE__ */ new Map();
  async list() {
    return [...this.sends.values()].map((p) => structuredClone(p));
  }
  async put(p) {
    this.sends.set(p.id, structuredClone(p));
  }
  async delete(id) {
    this.sends.delete(id);
  }
};

// src/client.ts
var refPattern = /^[A-Za-z0-9_-]{1,128}\/[A-Za-z0-9_-]{1,128}$/;
function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => void 0);
  return { promise, resolve, reject };
}
function randomHex(bytes) {
  const a = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}
var Client = class {
  opts;
  WS;
  store;
  initialDelay;
  maxDelay;
  token;
  st = "idle";
  ws = null;
  welcomed = null;
  conn = 0;
  // incremented at every welcome
  attempt = 0;
  reqSeq = 0;
  subSeq = 0;
  order = 0;
  reconnectTimer;
  welcomeTimer;
  pingTimer;
  loaded;
  pending = /* @__PURE__ */ new Map();
  subs = /* @__PURE__ */ new Map();
  sends = /* @__PURE__ */ new Map();
  waiters = /* @__PURE__ */ new Set();
  listeners = /* @__PURE__ */ new Map();
  constructor(options) {
    if (!options || typeof options.url !== "string" || options.url === "") {
      throw new EffectorsError("invalid", "Client: options.url is required, such as ws://127.0.0.1:9466/ws");
    }
    const WS = options.WebSocket ?? globalThis.WebSocket;
    if (!WS) {
      throw new EffectorsError("invalid", "Client: no WebSocket here: pass options.WebSocket (in Node 20, the ws package's WebSocket)");
    }
    this.WS = WS;
    this.store = options.store ?? new MemoryStore();
    this.token = options.token;
    this.initialDelay = options.reconnect?.initialDelay ?? 250;
    this.maxDelay = options.reconnect?.maxDelay ?? 1e4;
    this.opts = {
      url: options.url,
      idPrefix: options.idPrefix ?? "js-",
      requestTimeout: options.requestTimeout ?? 3e4,
      pingInterval: options.pingInterval ?? 25e3
    };
  }
  // ---- connection ----------------------------------------------------------
  /** The connection's state. */
  get status() {
    return this.st;
  }
  /** The welcome frame of the open connection (undefined while not open). */
  get welcome() {
    return this.welcomed ?? void 0;
  }
  /** The WebSocket in use, for diagnostics (closing it is a dropped connection: the client reconnects). */
  get socket() {
    return this.ws;
  }
  /** Sets the token used from the next connect on. */
  setToken(token) {
    this.token = token;
  }
  /**
   * Starts connecting (and reconnecting whenever the connection drops), and
   * resolves with the welcome frame once connected. It rejects with
   * `unauthorized` when the gateway refuses the token (call connect again
   * after {@link setToken}), `closed` when the client is closed first.
   */
  connect() {
    if (this.st === "closed") {
      return Promise.reject(new EffectorsError("closed", "connect: the client is closed"));
    }
    if (this.st === "open" && this.welcomed) {
      return Promise.resolve(this.welcomed);
    }
    const p = new Promise((resolve, reject) => this.waiters.add({ resolve, reject }));
    if (this.st === "idle" || this.st === "unauthorized") {
      this.attempt = 0;
      this.setStatus("connecting");
      this.ensureLoaded().then(
        () => {
          if (this.st === "connecting" && !this.ws) {
            this.open();
          }
        },
        (err) => this.emit("error", err)
      );
    }
    return p;
  }
  /**
   * Closes the connection and stops reconnecting. Sends not acknowledged
   * stay in the store (a new client re-sends them); their `acked` promises
   * and every request in flight reject with `closed`.
   */
  close() {
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
        ws.close(1e3, "client closed");
      } catch {
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
  on(event, fn) {
    let set = this.listeners.get(event);
    if (!set) {
      set = /* @__PURE__ */ new Set();
      this.listeners.set(event, set);
    }
    set.add(fn);
    return () => set.delete(fn);
  }
  emit(event, v) {
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
  setStatus(s) {
    if (this.st !== s) {
      this.st = s;
      this.emit("status", s);
    }
  }
  ensureLoaded() {
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
        this.loaded = void 0;
      });
    }
    return this.loaded;
  }
  open() {
    let ws;
    try {
      ws = new this.WS(this.opts.url);
    } catch (err) {
      const e = new EffectorsError("invalid", `connect to ${this.opts.url}: ${err.message}`);
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
      let f;
      try {
        const text = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data);
        f = JSON.parse(text);
      } catch {
        this.emit("error", new Error("a frame from the gateway is not JSON"));
        return;
      }
      this.onFrame(f);
    };
    ws.onerror = () => void 0;
    ws.onclose = (ev) => {
      if (this.ws === ws) {
        this.dropped(ev.code, ev.reason);
      }
    };
    this.welcomeTimer = setTimeout(() => this.abandon(ws, "no welcome frame in time"), this.opts.requestTimeout);
  }
  detach(ws) {
    ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
  }
  // abandon drops a connection that does not answer without waiting for a
  // close handshake that may never come.
  abandon(ws, why) {
    if (this.ws !== ws) {
      return;
    }
    this.detach(ws);
    try {
      ws.close(4e3, why);
    } catch {
    }
    this.dropped(4e3, why);
  }
  stopTimers() {
    clearTimeout(this.welcomeTimer);
    clearInterval(this.pingTimer);
    this.welcomeTimer = this.pingTimer = void 0;
  }
  // failPending rejects the requests in flight with err; the answers of
  // sends in flight are forgotten (the sends stay kept, and are sent again).
  failPending(err) {
    for (const [req, p] of this.pending) {
      clearTimeout(p.timer);
      if (!p.send) {
        p.reject(err);
      }
      this.pending.delete(req);
    }
  }
  // dropped handles the end of the connection.
  dropped(code, reason) {
    this.ws = null;
    this.welcomed = null;
    this.stopTimers();
    for (const e of this.sends.values()) {
      clearTimeout(e.retry);
      e.retry = void 0;
    }
    for (const s of this.subs.values()) {
      s.disconnected();
    }
    const why = `connection closed (${code}${reason ? ": " + reason : ""})`;
    if (code === CloseCodes.unauthorized) {
      const err = new EffectorsError("unauthorized", reason || "unauthorized", { fromGateway: true });
      this.failPending(err);
      this.emit("error", err);
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
  onWelcome(f) {
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
      this.transmit(e);
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
  pingOnce() {
    const ws = this.ws;
    if (!ws || this.st !== "open") {
      return;
    }
    this.request({ type: "ping" }).catch((err) => {
      if (err.code === "timeout") {
        this.abandon(ws, "no pong in time");
      }
    });
  }
  onFrame(f) {
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
          this.subs.get(f.sub).failed(err);
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
    const sub = f.sub;
    if (sub) {
      this.subs.get(sub)?.deliver(f);
    }
  }
  settle(req, f, err) {
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
  nextReq() {
    return "r" + ++this.reqSeq;
  }
  // write sends a frame on the open connection; false when there is none.
  write(frame) {
    const ws = this.ws;
    if (!ws || this.st !== "open") {
      return false;
    }
    ws.send(JSON.stringify(frame));
    return true;
  }
  waitOpen(timeout) {
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
    return new Promise((resolve, reject) => {
      const w = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        }
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
  async request(frame, opts = {}) {
    const timeout = opts.timeout ?? this.opts.requestTimeout;
    const started = Date.now();
    await this.waitOpen(timeout);
    const req = this.nextReq();
    const f = await new Promise((resolve, reject) => {
      const p = { resolve, reject };
      p.timer = setTimeout(
        () => {
          this.pending.delete(req);
          reject(new EffectorsError("timeout", `${frame.type}: no answer within ${timeout} ms`, { req }));
        },
        Math.max(1, timeout - (Date.now() - started))
      );
      this.pending.set(req, p);
      if (!this.write({ ...frame, req })) {
        this.pending.delete(req);
        clearTimeout(p.timer);
        reject(new EffectorsError("disconnected", `${frame.type}: not connected`, { req }));
      }
    });
    return f.result;
  }
  // ---- sends ---------------------------------------------------------------
  /** A new record id: the prefix and 24 random hex digits. */
  newId() {
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
  send(to, record = {}) {
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
    this.order = Math.max(this.order + 1, now * 1e3);
    const p = { id, to, record: { ...record, id }, created: now, order: this.order };
    const e = this.addEntry(p, false);
    const saved = this.store.put(p).then(
      () => {
        e.saved = true;
        this.transmit(e);
      },
      (err) => {
        e.saved = true;
        this.emit("error", new Error(`send ${id}: the store did not keep it (${err.message}); sending it without`));
        this.transmit(e);
        throw err;
      }
    );
    saved.catch(() => void 0);
    Object.defineProperty(e.handle, "saved", { value: saved });
    return e.handle;
  }
  /** Handles of every send not yet acknowledged, its earlier ones (from the store) included, in order. */
  async pendingSends() {
    await this.ensureLoaded();
    return [...this.sends.values()].sort((a, b) => a.p.order - b.p.order).map((e) => e.handle);
  }
  addEntry(p, saved) {
    const d = deferred();
    const e = { p, status: "local_only", saved, conn: 0, resolve: d.resolve, reject: d.reject, handle: void 0 };
    e.handle = {
      id: p.id,
      to: p.to,
      record: p.record,
      get status() {
        return e.status;
      },
      saved: Promise.resolve(),
      acked: d.promise
    };
    this.sends.set(p.id, e);
    this.emit("send", { id: p.id, to: p.to, record: p.record, status: "local_only" });
    return e;
  }
  // transmit sends e once on the open connection.
  transmit(e) {
    if (!e.saved || e.status !== "local_only" || this.st !== "open" || e.conn === this.conn || this.sends.get(e.p.id) !== e) {
      return;
    }
    const req = this.nextReq();
    e.conn = this.conn;
    this.pending.set(req, {
      send: true,
      resolve: (f) => void this.acked(e, f),
      reject: (err) => this.refused(e, err)
    });
    if (!this.write({ type: "send", req, to: e.p.to, record: e.p.record })) {
      this.pending.delete(req);
      e.conn = 0;
    }
  }
  async acked(e, ack) {
    if (e.status !== "local_only") {
      return;
    }
    e.status = "acked";
    this.sends.delete(e.p.id);
    try {
      await this.store.delete(e.p.id);
    } catch (err) {
      this.emit("error", new Error(`send ${e.p.id}: acked, but the store did not forget it (${err.message}); it will be re-sent and acked as a duplicate`));
    }
    e.resolve(ack);
    this.emit("send", { id: e.p.id, to: e.p.to, record: e.p.record, status: "acked", ack });
  }
  refused(e, err) {
    if (e.status !== "local_only") {
      return;
    }
    if (err.code === "unavailable" || err.code === "timeout") {
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
    this.store.delete(e.p.id).catch((se) => this.emit("error", se));
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
  subscribe(spec, onFrame, opts = {}) {
    if (this.st === "closed") {
      throw new EffectorsError("closed", "subscribe: the client is closed");
    }
    checkPositions(spec);
    const name = "s" + ++this.subSeq;
    const s = new SubscriptionImpl(this, name, spec, onFrame, opts);
    this.subs.set(name, s);
    if (this.st === "open") {
      s.resume();
    }
    return s;
  }
  /** @internal */
  _write(frame) {
    return this.write(frame);
  }
  /** @internal */
  _isOpen() {
    return this.st === "open";
  }
  /** @internal */
  _forget(name) {
    this.subs.delete(name);
  }
  /** @internal */
  _error(err) {
    this.emit("error", err);
  }
  // ---- requests ------------------------------------------------------------
  /** The state document of an effector. */
  state(effector) {
    return this.request({ type: "state", effector });
  }
  /** Creates an effector, with an initial state or the kind's; resolves with its state document (`exists` if it does). */
  create(effector, state) {
    return this.request(state === void 0 ? { type: "create", effector } : { type: "create", effector, state });
  }
  /** Terminates an effector; resolves with its state document, TERMINATED. */
  terminate(effector) {
    return this.request({ type: "terminate", effector });
  }
  /** The kinds nodes host. */
  async kinds() {
    return (await this.request({ type: "kinds" })).kinds;
  }
  /** A page of the effectors of a kind. */
  effectors(q) {
    return this.request({ type: "effectors", ...q });
  }
  /** A page of records from the record store. */
  query(query) {
    return this.request({ type: "query", query });
  }
  /** One record by id (`not_found` when the store has none). */
  get(id) {
    return this.request({ type: "get", id });
  }
  /** Starts an orchestration; resolves with its id. */
  async orchStart(name, input) {
    const frame = { type: "orch.start", name };
    if (input !== void 0) {
      frame.input = input;
    }
    return (await this.request(frame)).id;
  }
  /** The status of an orchestration. */
  orchStatus(id) {
    return this.request({ type: "orch.status", id });
  }
  /** Gives input to an orchestration waiting for it (`not_waiting`, `finished` otherwise). */
  orchInput(id, input) {
    return this.request({ type: "orch.input", id, input });
  }
  /** Cancels an orchestration (`finished` when it is over). */
  orchCancel(id) {
    return this.request({ type: "orch.cancel", id });
  }
  /**
   * A page of orchestrations, filtered and paged by the gateway (a user's own; an admin's all or `owner`'s).
   * Errors: `bad_request` (a bad field, cursor or limit), `forbidden` (a user naming another owner).
   */
  orchList(q = {}) {
    return this.request({ type: "orch.list", ...q });
  }
  /**
   * A page of dead letters, filtered and paged by the gateway (a user's own; an admin's all or `owner`'s).
   * Errors: `bad_request` (a bad field, cursor or limit), `forbidden` (a user naming another owner).
   */
  deadList(q = {}) {
    return this.request({ type: "dead.list", ...q });
  }
  /**
   * Sends the record of the dead letter at `seq` again, as a new record caused by the original.
   * Errors: `not_found` (no dead letter at seq, or its effector is gone), `forbidden`, `bad_request`, `terminated`.
   */
  deadReplay(seq) {
    return this.request({ type: "dead.replay", seq });
  }
  /** Deletes the dead letter at `seq` (`not_found` when it is not there, `forbidden` when another user's). */
  deadDiscard(seq) {
    return this.request({ type: "dead.discard", seq });
  }
  /** Nodes, the partitions each reads with their counts, and the index lag (admins; a user gets `forbidden`). */
  nodes() {
    return this.request({ type: "nodes" });
  }
  /** A round trip to the gateway. */
  async ping() {
    await this.request({ type: "ping" });
  }
};
function kindWide(spec) {
  return (spec.topic === "outbox" || spec.topic === "state") && "kind" in spec && spec.kind !== void 0;
}
function checkPositions(spec) {
  const { positions, from } = spec;
  if (positions === void 0) {
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
    if (!Number.isSafeInteger(at) || at < 1) {
      throw new EffectorsError("invalid", `subscribe: position of ${JSON.stringify(name)} is ${JSON.stringify(at)}: want a whole number from 1 (the last seq or revision received + 1)`);
    }
  }
}
var SubscriptionImpl = class {
  constructor(client, name, spec, onFrame, opts) {
    this.client = client;
    this.name = name;
    this.spec = spec;
    this.onFrame = onFrame;
    this.opts = opts;
    const s = spec;
    this.kindWide = kindWide(spec);
    this.from = s.from;
    this.cursor = s.cursor;
    if (this.kindWide && s.positions) {
      this.positions = { ...s.positions };
    }
  }
  client;
  name;
  spec;
  onFrame;
  opts;
  status = "pending";
  error;
  // Where it resumes: from (one stream or bucket), cursor (records), or,
  // once known, positions (kind-wide outbox and state: the next seq or
  // revision of each stream or bucket; only ever moved forward).
  from;
  cursor;
  positions;
  kindWide;
  get position() {
    if (this.spec.topic === "records") {
      return { cursor: this.cursor };
    }
    if (this.positions) {
      return { positions: { ...this.positions } };
    }
    return { from: this.from };
  }
  resume() {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    this.status = "pending";
    const frame = { ...this.spec, type: "subscribe", sub: this.name };
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
  subscribed(f) {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    if (this.kindWide && f.positions) {
      for (const [name, at] of Object.entries(f.positions)) {
        this.advance(name, at);
      }
    }
    if (this.status === "pending") {
      this.status = "active";
    }
  }
  disconnected() {
    if (this.status === "active") {
      this.status = "pending";
    }
  }
  // advance moves the position of stream (bucket) name to next, forward
  // only: false when next is not past it (a frame delivered before).
  advance(name, next) {
    const at = this.positions?.[name];
    if (at !== void 0 && next <= at) {
      return false;
    }
    (this.positions ??= {})[name] = next;
    return true;
  }
  deliver(f) {
    if (this.status === "closed" || this.status === "failed") {
      return;
    }
    switch (f.type) {
      case "record":
      case "dead": {
        const stream = f.type === "record" ? f.stream : void 0;
        if (this.kindWide && stream) {
          if (!this.advance(stream, f.seq + 1)) {
            return;
          }
          break;
        }
        if (this.from && f.seq < this.from) {
          return;
        }
        this.from = f.seq + 1;
        break;
      }
      case "state":
      case "orchestration": {
        const bucket = f.type === "state" ? f.bucket : void 0;
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
  failed(err) {
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
  restart() {
    if (this.status !== "failed") {
      return;
    }
    this.status = "pending";
    this.error = void 0;
    if (this.client._isOpen()) {
      this.resume();
    }
  }
  async close() {
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
    }
  }
};

// src/frames.ts
var PROTOCOL_VERSION = 1;

// src/indexeddb.ts
var STORE = "sends";
var IndexedDBStore = class {
  constructor(name = "effectors-client", factory = globalThis.indexedDB) {
    this.name = name;
    this.factory = factory;
  }
  name;
  factory;
  db;
  open() {
    if (!this.db) {
      const factory = this.factory;
      if (!factory) {
        return Promise.reject(new Error("IndexedDBStore: no indexedDB here (use MemoryStore, or FileStore in Node)"));
      }
      this.db = new Promise((resolve, reject) => {
        const req = factory.open(this.name, 1);
        req.onupgradeneeded = () => {
          req.result.createObjectStore(STORE, { keyPath: "id" });
        };
        req.onsuccess = () => resolve(req.result);
        req.onerror = () => reject(req.error ?? new Error(`IndexedDBStore: cannot open database ${this.name}`));
        req.onblocked = () => reject(new Error(`IndexedDBStore: database ${this.name} is blocked by another tab's older version`));
      });
      this.db.catch(() => {
        this.db = void 0;
      });
    }
    return this.db;
  }
  async run(mode, fn) {
    const db = await this.open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = fn(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error ?? req.error ?? new Error("IndexedDBStore: transaction failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDBStore: transaction aborted"));
    });
  }
  async list() {
    return await this.run("readonly", (s) => s.getAll());
  }
  async put(p) {
    await this.run("readwrite", (s) => s.put(p));
  }
  async delete(id) {
    await this.run("readwrite", (s) => s.delete(id));
  }
};
export {
  Client,
  CloseCodes,
  EffectorsError,
  GatewayCodes,
  IndexedDBStore,
  MemoryStore,
  PROTOCOL_VERSION,
  isEffectorsError
};
