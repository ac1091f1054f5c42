// effectors console: plain JavaScript on the gateway's WebSocket frame
// protocol (docs/gateway.md), spoken by @effectors/client (clients/js),
// bundled into effectors-client.js. No build step here.
//
// Views (tabs): effectors (paged by the gateway), records (the log of an
// effector or a process, and the send form), orchestrations and one
// orchestration's page, dead letters (replay, discard), nodes. Every list
// has filters and pages; a row opens the record drawer (envelope and
// payload) or the page it names.

import { Client, IndexedDBStore } from "./effectors-client.js";

const $ = (sel) => document.querySelector(sel);
const PAGE = 50;        // rows per page of the client-side lists
const MAX_ITEMS = 5000; // records a list keeps (the oldest go first)

// ---- token: #token=… (at load or later), the form, session storage ------

const TOKEN_KEY = "ea-token";

// takeHashToken moves a #token=… from the address into session storage
// (and out of the address bar); it reports whether there was one.
function takeHashToken() {
  const m = location.hash.match(/(?:^#|&)token=([^&]*)/);
  if (!m) { return false; }
  let t = m[1];
  try { t = decodeURIComponent(t); } catch (e) { /* keep it as it is */ }
  sessionStorage.setItem(TOKEN_KEY, t);
  const rest = location.hash.replace(/^#token=[^&]*&?/, "#").replace(/&token=[^&]*/, "");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
  return true;
}

const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

takeHashToken();

const proto = location.protocol === "https:" ? "wss:" : "ws:";
const client = new Client({
  url: `${proto}//${location.host}/ws`,
  token,
  // Sends not acked yet are kept in IndexedDB: a reload re-sends them.
  store: new IndexedDBStore("effectors-live-view"),
  idPrefix: "ui-",
  reconnect: { initialDelay: 500, maxDelay: 10000 },
});
// The current WebSocket, for the browser's console (closing it is a
// dropped connection: the client reconnects and resumes).
Object.defineProperty(window, "ws", { get: () => client.socket });
window.effectors = client;

function setConn(state, text) {
  const el = $("#conn");
  el.dataset.state = state;
  el.textContent = text;
  el.title = text;
}

// showTokenForm shows the token form at once, saying why.
function showTokenForm(why) {
  $("#token-why").textContent = why;
  $("#token-form").hidden = false;
  $("#token").focus();
}

// useToken connects with the token now: a refused client connects again,
// a connection waiting for its welcome (or open as someone else) is
// dropped, and the client reconnects with the new token.
function useToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
  $("#token-form").hidden = true;
  setConn("connecting", "connecting…");
  if (client.status === "unauthorized" || client.status === "idle") {
    client.connect().catch(() => undefined);
  } else if (client.socket) {
    client.socket.close();
  }
}

let refusal = "";
client.on("error", (e) => {
  if (e.code === "unauthorized") { refusal = e.message; return; }
  console.warn("gateway:", e);
});
client.on("status", (s) => {
  switch (s) {
  case "connecting":
    setConn("connecting", token() ? "connecting…" : "connecting… (no token given)");
    return;
  case "open":
    setConn("open", "connected");
    $("#token-form").hidden = true;
    return;
  case "reconnecting": setConn("closed", "disconnected, reconnecting…"); return;
  case "unauthorized": {
    // The gateway's reason reads "unauthorized: <why>": say it once.
    const why = refusal.replace(/^unauthorized:\s*/, "") || "no token";
    setConn("token", token() ? "token refused" : "token needed");
    showTokenForm(token() ? `The gateway refused the token: ${why}. Paste another.` : `This gateway needs a token (${why}). Paste yours.`);
    return;
  }
  default: setConn("closed", s);
  }
});

let identity; // "user/role" of the last welcome
client.on("welcome", (w) => {
  const who = w.user ? `${w.user} (${w.role})` : "no authentication (admin)";
  $("#user").textContent = who;
  document.body.classList.toggle("admin", w.role === "admin");
  const id = `${w.user || ""}/${w.role}`;
  if (identity !== id) {
    if (identity !== undefined) { resetAll(); }
    startLists();
  }
  identity = id;
  loadKinds();
  if (currentView === "nodes") { pollNodes(); }
});

$("#token-form").onsubmit = (ev) => {
  ev.preventDefault();
  const t = $("#token").value.trim();
  if (t) { useToken(t); $("#token").value = ""; }
};

window.addEventListener("hashchange", () => {
  if (takeHashToken()) { useToken(token()); }
  route();
});

// ---- requests and subscriptions -----------------------------------------

const errText = (e) => (e.code ? `${e.code}: ${e.message}` : e.message);

// subscribe registers a subscription, replacing one of the same name; the
// client resumes it from its last seq, revision or cursor after a
// reconnect (a kind's state from the last revision of each bucket).
const named = new Map();
function subscribe(name, spec, onFrame, onError) {
  unsubscribe(name);
  const s = client.subscribe(spec, onFrame, { onError: onError || ((e) => console.warn(`subscription ${name}:`, e)) });
  named.set(name, s);
  return s;
}

function unsubscribe(name) {
  const s = named.get(name);
  if (s) { named.delete(name); s.close(); }
}

// ---- helpers --------------------------------------------------------------

// td makes a one-line cell; its whole text is its tooltip (lists cut it
// with an ellipsis; the drawer shows it whole).
function td(text, cls) {
  const el = document.createElement("td");
  const s = text === undefined || text === null ? "" : String(text);
  el.textContent = s.length > 2000 ? s.slice(0, 2000) + "…" : s;
  if (s) { el.title = s.length > 2000 ? s.slice(0, 2000) + "… (the drawer shows it all)" : s; }
  if (cls) { el.className = cls; }
  return el;
}

function button(label, onclick, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (cls) { b.className = cls; }
  b.onclick = (ev) => { ev.stopPropagation(); onclick(b, ev); };
  return b;
}

// confirmButton acts on a second click within 4 s (the first asks).
function confirmButton(label, action, cls) {
  let armed = 0;
  return button(label, async (b) => {
    if (Date.now() - armed > 4000) {
      armed = Date.now();
      b.textContent = "sure?";
      b.dataset.armed = "1";
      setTimeout(() => { if (b.dataset.armed) { b.textContent = label; delete b.dataset.armed; } }, 4000);
      return;
    }
    delete b.dataset.armed;
    b.disabled = true;
    b.textContent = label + "…";
    try { await action(b); } finally { b.disabled = false; b.textContent = label; }
  }, cls);
}

function json(v) { return v === undefined ? "" : JSON.stringify(v); }
function pretty(v) { return v === undefined ? "" : JSON.stringify(v, null, 2); }

function time(t) {
  if (!t) { return ""; }
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function payloadText(r) {
  if (r.invalid) { return "invalid: " + r.invalid; }
  if (r.json !== undefined) { return json(r.json); }
  return r.payload ? `(${r.content_type || "binary"}, base64) ${r.payload}` : "";
}

function emptyRow(tbody, cols, text) {
  const tr = document.createElement("tr");
  tr.className = "empty";
  const c = td(text);
  c.colSpan = cols;
  tr.append(c);
  tbody.append(tr);
}

// List is a client-side list: items by key, a filter, a sort, pages.
class List {
  constructor({ table, pager, key, row, filter = () => true, sort, empty = "nothing yet", pageSize = PAGE, onRender, flash = true }) {
    this.tbody = $(table + " tbody");
    this.cols = $(table + " thead tr").children.length;
    this.pager = pager ? $(pager) : null;
    Object.assign(this, { key, row, filter, sort, empty, pageSize, onRender, flash });
    this.items = new Map();
    this.fresh = new Set();
    this.page = 0;
    this.timer = 0;
    this.cleared = Date.now();
  }
  upsert(item) {
    const k = this.key(item);
    this.items.set(k, item);
    // Flash what changes live, not what a (re)load brings.
    if (this.flash && Date.now() - this.cleared > 1000) { this.fresh.add(k); }
    if (this.items.size > MAX_ITEMS) {
      const oldest = [...this.items.values()].sort(this.sort).at(-1);
      this.items.delete(this.key(oldest));
    }
    this.schedule();
  }
  remove(k) { this.items.delete(k); this.schedule(); }
  get(k) { return this.items.get(k); }
  clear() { this.items.clear(); this.page = 0; this.cleared = Date.now(); this.schedule(); }
  refilter() { this.page = 0; this.schedule(); }
  schedule() { if (!this.timer) { this.timer = setTimeout(() => { this.timer = 0; this.render(); }, 20); } }
  visible() { return [...this.items.values()].filter(this.filter).sort(this.sort); }
  render() {
    const all = this.visible();
    const pages = Math.max(1, Math.ceil(all.length / this.pageSize));
    this.page = Math.min(this.page, pages - 1);
    const from = this.page * this.pageSize;
    const shown = all.slice(from, from + this.pageSize);
    this.tbody.replaceChildren();
    for (const it of shown) {
      const tr = this.row(it);
      const k = this.key(it);
      tr.dataset.key = k;
      if (this.fresh.has(k)) { tr.classList.add("fresh"); }
      this.tbody.append(tr);
    }
    this.fresh.clear();
    if (shown.length === 0) { emptyRow(this.tbody, this.cols, this.items.size ? "nothing matches the filters" : this.empty); }
    if (this.pager) {
      renderPager(this.pager, {
        text: all.length ? `${from + 1}–${from + shown.length} of ${all.length}${all.length < this.items.size ? ` (${this.items.size} in all)` : ""}` : "0",
        prev: this.page > 0 ? () => { this.page--; this.render(); } : null,
        next: this.page < pages - 1 ? () => { this.page++; this.render(); } : null,
      });
    }
    if (this.onRender) { this.onRender(all); }
  }
}

function renderPager(el, { text, prev, next }) {
  const p = button("‹ prev", () => prev && prev(), "prev");
  p.disabled = !prev;
  const n = button("next ›", () => next && next(), "next");
  n.disabled = !next;
  const s = document.createElement("span");
  s.className = "range";
  s.textContent = text;
  el.replaceChildren(p, s, n);
}

// ServerList is a list the gateway pages and filters: one page at a time
// (prev/next by cursor, newest first), loaded again when its filters
// change, kept live by a subscription: a row on the page follows its item
// (or leaves when it no longer fits the filters); an item that is not on
// the page and fits reloads the first page when that is the one shown.
class ServerList {
  constructor({ table, pager, key, row, fetch, fits = () => true, empty = "nothing yet", onLoad, onError }) {
    this.tbody = $(table + " tbody");
    this.cols = $(table + " thead tr").children.length;
    this.pager = $(pager);
    Object.assign(this, { key, row, fetch, fits, empty, onLoad, onError });
    this.items = new Map(); // key → item, the page's
    this.cursors = [""];
    this.page = 0;
    this.loads = 0;
    this.timer = 0;
  }
  // first loads the first page (the filters changed).
  first() { this.cursors = [""]; this.page = 0; return this.load(); }
  async load() {
    const my = ++this.loads;
    let res;
    try { res = await this.fetch(this.cursors[this.page] || undefined); } catch (e) { if (my === this.loads && this.onError) { this.onError(e); } return; }
    if (my !== this.loads) { return; } // a later load answers
    this.items.clear();
    this.tbody.replaceChildren();
    for (const it of res.items) {
      this.items.set(this.key(it), it);
      this.tbody.append(this.rowOf(it, false));
    }
    if (!res.items.length) { emptyRow(this.tbody, this.cols, this.page === 0 ? this.empty : "nothing more"); }
    this.cursors[this.page + 1] = res.cursor;
    this.cursors.length = this.page + 2;
    const from = this.page * PAGE;
    renderPager(this.pager, {
      text: `page ${this.page + 1} · ${res.items.length ? `${from + 1}–${from + res.items.length}` : "none"}${res.more ? " · more" : ""}`,
      prev: this.page > 0 ? () => { this.page--; this.load(); } : null,
      next: res.more && res.cursor ? () => { this.page++; this.load(); } : null,
    });
    if (this.onLoad) { this.onLoad(res, this.page); }
  }
  rowOf(it, flash) {
    const tr = this.row(it);
    tr.dataset.key = this.key(it);
    if (flash) { tr.classList.add("fresh"); }
    return tr;
  }
  rowByKey(k) { return [...this.tbody.children].find((tr) => tr.dataset.key === k); }
  // upsert follows a live change of an item.
  upsert(it) {
    const k = this.key(it);
    const tr = this.rowByKey(k);
    if (tr) {
      if (this.fits(it)) { this.items.set(k, it); tr.replaceWith(this.rowOf(it, true)); } else { this.remove(k); }
    } else if (this.page === 0 && this.fits(it)) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.load(), 200); // a burst reloads once
    }
  }
  remove(k) { this.items.delete(k); this.rowByKey(k)?.remove(); }
  get(k) { return this.items.get(k); }
  clear() { this.items.clear(); this.cursors = [""]; this.page = 0; this.loads++; this.tbody.replaceChildren(); }
}

// debounced calls f once typing stops for 300 ms.
function debounced(f) {
  let t = 0;
  return () => { clearTimeout(t); t = setTimeout(f, 300); };
}

// includes is a case-insensitive search over some values.
function includes(q, ...vals) {
  if (!q) { return true; }
  q = q.toLowerCase();
  return vals.some((v) => v !== undefined && v !== null && String(v).toLowerCase().includes(q));
}

// ---- views and routing (#/effectors, #/orch/<id>, …) -------------------

let currentView = "";
const onShow = {};

function showView(name, path) {
  currentView = name;
  for (const v of document.querySelectorAll(".view")) { v.classList.toggle("active", v.dataset.view === name); }
  const tab = name === "orch" ? "orchestrations" : name;
  for (const b of document.querySelectorAll("#tabs button")) { b.classList.toggle("active", b.dataset.view === tab); }
  const hash = "#/" + (path || name);
  if (location.hash !== hash) { history.replaceState(null, "", location.pathname + location.search + hash); }
  if (onShow[name]) { onShow[name](); }
}

function route() {
  const m = location.hash.match(/^#\/([a-z]+)(?:\/(.+))?$/);
  if (!m) { if (!currentView) { showView("effectors"); } return; }
  const [, view, arg] = m;
  if (view === "orch" && arg) { openOrch(decodeURIComponent(arg)); return; }
  if (view === "records" && arg) {
    const [by, ...rest] = arg.split("/");
    if ((by === "effector" || by === "process") && rest.length) { openLog(by, decodeURIComponent(rest.join("/"))); return; }
  }
  if ($(`.view[data-view="${view}"]`)) { showView(view); } else { showView("effectors"); }
}

for (const b of document.querySelectorAll("#tabs button")) { b.onclick = () => showView(b.dataset.view); }

// ---- the record drawer ------------------------------------------------------

const ENVELOPE = ["id", "type", "effector", "box", "from", "cause", "process", "owner", "priority", "reply", "time", "stored",
  "stream", "seq", "subject", "content_type", "invalid"];

// DRAWER_LINKS: envelope fields the drawer links to what they name.
const DRAWER_LINKS = {
  cause: { title: "open the record that caused this one", open: (id) => openRecordByID(id) },
  process: { title: "open the log of this process", open: (id) => { closeDrawer(); openLog("process", id); } },
  effector: { title: "open the log of this effector", open: (ref) => { closeDrawer(); openLog("effector", ref); } },
  from: { title: "open the log of the sender", open: (ref) => { closeDrawer(); openLog("effector", ref); } },
};

// openRecordByID shows a record from the record store in the drawer.
async function openRecordByID(id) {
  try {
    const r = await client.get(id);
    openDrawer(`record ${r.id}`, r);
  } catch (e) {
    $("#drawer-payload").textContent = `record ${id}: ${errText(e)}`;
  }
}

// openDrawer shows a record's envelope and pretty-printed payload; extra
// holds facts shown first (a dead letter's) and action buttons.
function openDrawer(title, r, extra = {}) {
  $("#drawer-title").textContent = title;
  const tbody = $("#drawer-envelope tbody");
  tbody.replaceChildren();
  const add = (k, v) => {
    if (v === undefined || v === null || v === "") { return; }
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = k;
    const c = document.createElement("td");
    c.dataset.field = k;
    const go = DRAWER_LINKS[k];
    if (go) {
      // Follow the chain: the record that caused this one, the log of its
      // process or effector.
      const a = document.createElement("a");
      a.href = "#";
      a.textContent = String(v);
      a.title = go.title;
      a.onclick = (ev) => { ev.preventDefault(); go.open(String(v)); };
      c.append(a);
    } else {
      c.textContent = (k === "time" || k === "stored") ? `${v} (${time(v)})` : String(v);
    }
    tr.append(th, c);
    tbody.append(tr);
  };
  for (const [k, v] of extra.facts || []) { add(k, v); }
  for (const k of ENVELOPE) { add(k, r[k]); }
  let p;
  if (r.invalid) { p = `not valid: ${r.invalid}\n\n${r.payload || ""}`; } else if (r.json !== undefined) { p = pretty(r.json); } else { p = r.payload ? `${r.content_type || "binary"} payload, base64:\n${r.payload}` : "(no payload)"; }
  $("#drawer-payload").textContent = p;
  $("#drawer-actions").replaceChildren(...(extra.actions || []));
  $("#drawer").dataset.id = r.id || "";
  $("#drawer").hidden = false;
}

function closeDrawer() { $("#drawer").hidden = true; }
$("#drawer-close").onclick = closeDrawer;
document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { closeDrawer(); } });

// ---- effectors: a page of one kind, from the gateway, kept live ------------

const eff = { cursors: [""], page: 0, more: false, rows: new Map(), kinds: new Map(), loadedAt: 0 };

async function loadKinds() {
  let res;
  try { res = await client.kinds(); } catch (e) { return; }
  const sel = $("#eff-kind");
  for (const k of res) {
    if (!eff.kinds.has(k.kind)) {
      const o = document.createElement("option");
      o.value = k.kind;
      sel.append(o);
    }
    eff.kinds.set(k.kind, k);
    sel.querySelector(`option[value="${CSS.escape(k.kind)}"]`).textContent = `${k.kind} (${k.nodes.length} node${k.nodes.length === 1 ? "" : "s"})`;
  }
  if (!sel.value && sel.options.length) { sel.value = sel.options[0].value; }
  if (sel.value && !named.has("state")) { selectKind(); }
}

function effFilter() {
  return { kind: $("#eff-kind").value, status: $("#eff-status").value, owner: $("#eff-owner").value.trim(), limit: Number($("#eff-limit").value) };
}

// selectKind lists the first page of the chosen kind and follows the
// kind's state documents.
function selectKind() {
  const kind = $("#eff-kind").value;
  if (!kind) { return; }
  eff.cursors = [""];
  eff.page = 0;
  loadEffectors();
  subscribe("state", { topic: "state", kind }, (f) => {
    if (f.type !== "state") { return; }
    if (f.deleted) { eff.rows.get(f.effector)?.remove(); eff.rows.delete(f.effector); return; }
    const d = f.document;
    const fl = effFilter();
    // Rows on the page follow their effector; others wait for the next
    // load (the watch starts with every effector of the kind, which would
    // flood the page).
    const tr = eff.rows.get(f.effector);
    const fits = (!fl.status || d.status === fl.status) && (!fl.owner || d.owner === fl.owner);
    if (tr) {
      if (fits) { fillEffector(tr, d, Date.now() - eff.loadedAt > 1000); } else { tr.remove(); eff.rows.delete(f.effector); }
    }
  });
}

async function loadEffectors() {
  const fl = effFilter();
  if (!fl.kind) { return; }
  $("#eff-error").textContent = "";
  let res;
  try {
    res = await client.effectors({ kind: fl.kind, status: fl.status || undefined, owner: fl.owner || undefined, limit: fl.limit, cursor: eff.cursors[eff.page] || undefined });
  } catch (e) { $("#eff-error").textContent = errText(e); return; }
  eff.rows.clear();
  eff.loadedAt = Date.now();
  const tbody = $("#effectors tbody");
  tbody.replaceChildren();
  for (const d of res.effectors) { tbody.append(effectorRow(d)); }
  if (!res.effectors.length) { emptyRow(tbody, 7, "no effectors of this kind match"); }
  eff.more = res.more;
  eff.cursors[eff.page + 1] = res.cursor;
  const from = eff.page * fl.limit;
  renderPager($("#eff-pager"), {
    text: `page ${eff.page + 1} · ${res.effectors.length ? `${from + 1}–${from + res.effectors.length}` : "none"}${res.more ? " · more" : ""}`,
    prev: eff.page > 0 ? () => { eff.page--; loadEffectors(); } : null,
    next: res.more ? () => { eff.page++; loadEffectors(); } : null,
  });
}

function effectorRow(d) {
  const tr = document.createElement("tr");
  const ref = `${d.kind}/${d.id}`;
  tr.className = "clickable";
  tr.dataset.effector = ref;
  tr.onclick = () => openLog("effector", ref);
  eff.rows.set(ref, tr);
  fillEffector(tr, d, false);
  return tr;
}

function fillEffector(tr, d, flash = true) {
  const ref = `${d.kind}/${d.id}`;
  const term = confirmButton("terminate", async () => {
    try { await client.terminate(ref); } catch (e) { $("#eff-error").textContent = `terminate ${ref}: ${errText(e)}`; }
  }, "danger terminate");
  term.disabled = d.status === "TERMINATED";
  const act = document.createElement("td");
  act.append(term);
  tr.dataset.status = d.status;
  tr.replaceChildren(td(d.id, "mono"), td(d.status, "status status-" + d.status), td(json(d.state) + (d.error ? " — " + d.error : ""), "json state"),
    td(d.seq, "seq"), td(d.owner), td(time(d.updated)), act);
  if (flash) { tr.classList.remove("fresh"); void tr.offsetWidth; tr.classList.add("fresh"); }
}

for (const id of ["#eff-kind"]) { $(id).onchange = selectKind; }
for (const id of ["#eff-status", "#eff-limit"]) { $(id).onchange = () => { eff.cursors = [""]; eff.page = 0; loadEffectors(); }; }
$("#eff-owner").onchange = () => { eff.cursors = [""]; eff.page = 0; loadEffectors(); };
$("#eff-filter").onsubmit = (ev) => { ev.preventDefault(); eff.cursors = [""]; eff.page = 0; loadEffectors(); };
$("#eff-reload").onclick = () => loadEffectors();

$("#create-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#eff-error").textContent = "";
  const ref = $("#create-ref").value.trim();
  let state;
  const st = $("#create-state").value.trim();
  if (st) {
    try { state = JSON.parse(st); } catch (e) { $("#eff-error").textContent = "state is not JSON: " + e.message; return; }
  }
  try {
    const doc = await client.create(ref, state);
    $("#create-ref").value = "";
    if ($("#eff-kind").value !== doc.kind) {
      await loadKinds();
      if ([...$("#eff-kind").options].some((o) => o.value === doc.kind)) { $("#eff-kind").value = doc.kind; selectKind(); }
      return;
    }
    // Shown at the top of the page it was created from, and kept live.
    if (!eff.rows.has(ref)) {
      $("#effectors tbody .empty")?.remove();
      $("#effectors tbody").prepend(effectorRow(doc));
    }
  } catch (e) { $("#eff-error").textContent = `create ${ref}: ${errText(e)}`; }
};

// ---- records: the log of an effector or a process --------------------------

const logList = new List({
  table: "#log", pager: "#log-pager", empty: "no records yet",
  key: (r) => `${r.box}/${r.stream}/${r.seq}/${r.id}`,
  sort: (a, b) => (b.stored || "").localeCompare(a.stored || "") || b.seq - a.seq,
  filter: (r) => includes($("#log-type").value.trim(), r.type || "message") && (!$("#log-box").value || r.box === $("#log-box").value) &&
    includes($("#log-search").value.trim(), r.id, r.cause, r.process, r.effector, r.from, payloadText(r)),
  row: (r) => {
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.id = r.id;
    tr.dataset.type = r.type || "message";
    tr.onclick = () => openDrawer(`record ${r.id}`, r);
    tr.append(td(time(r.stored)), td(r.box), td(r.effector, "mono"), td(r.type || "message"), td(r.id, "mono"), td(r.cause, "mono"),
      td(r.process, "mono"), td(payloadText(r), "json"));
    return tr;
  },
});
for (const id of ["#log-type", "#log-search"]) { $(id).oninput = () => logList.refilter(); }
$("#log-box").onchange = () => logList.refilter();
$("#log-filter").onsubmit = (ev) => ev.preventDefault();

function openLog(by, target) {
  $("#log-by").value = by;
  $("#log-target").value = target;
  $("#log-title").textContent = `${by} ${target}`;
  if (by === "effector" && !$("#send-to").value) { $("#send-to").value = target; }
  showView("records", `records/${by}/${encodeURIComponent(target)}`);
  logList.clear();
  $("#log-state").textContent = "loading history…";
  const frame = { topic: "records" };
  frame[by] = target;
  subscribe("log", frame, (f) => {
    for (const r of f.records) { logList.upsert(r); }
    if (f.live) { $("#log-state").textContent = "live"; }
  }, (e) => { $("#log-state").textContent = errText(e); });
}

$("#log-form").onsubmit = (ev) => {
  ev.preventDefault();
  const target = $("#log-target").value.trim();
  if (target) { openLog($("#log-by").value, target); }
};

// ---- send a record -------------------------------------------------------------

// sendItem shows a send and its sync state: local_only until the ack, then
// acked (or refused).
function sendItem(h) {
  let li = $(`#sends li[data-id="${CSS.escape(h.id)}"]`);
  if (!li) {
    li = document.createElement("li");
    li.dataset.id = h.id;
    $("#sends").prepend(li);
    while ($("#sends").children.length > 20) { $("#sends").lastChild.remove(); }
  }
  return li;
}

function showSend(h) {
  const li = sendItem(h);
  li.dataset.sync = "local_only";
  li.textContent = `${h.to} ${h.record.type} ${h.id}`;
  h.acked.then((ack) => {
    li.dataset.sync = "acked";
    li.textContent = `${h.to} ${h.record.type} ${h.id} → ${ack.stream} seq ${ack.seq}${ack.duplicate ? " (stored before)" : ""}`;
  }, (e) => {
    if (e.code === "closed") { return; } // stays kept; re-sent by the next page
    li.dataset.sync = "refused";
    li.textContent = `${h.to} ${h.record.type}: ${errText(e)}`;
  });
}

$("#send-form").onsubmit = (ev) => {
  ev.preventDefault();
  $("#send-error").textContent = "";
  const to = $("#send-to").value.trim();
  let payload;
  const text = $("#send-payload").value.trim();
  if (text) {
    try { payload = JSON.parse(text); } catch (e) { $("#send-error").textContent = "payload is not JSON: " + e.message; return; }
  }
  const record = { type: $("#send-type").value.trim() || "message", payload };
  if ($("#send-process").value.trim()) { record.process = $("#send-process").value.trim(); }
  if ($("#send-priority").value) { record.priority = $("#send-priority").value; }
  let h;
  try { h = client.send(to, record); } catch (e) { $("#send-error").textContent = errText(e); return; }
  showSend(h);
};

// ---- orchestrations -------------------------------------------------------------

const FINAL = ["COMPLETED", "FAILED", "CANCELLED"];

function orchFilter() {
  return { status: $("#orch-status").value || undefined, search: $("#orch-search").value.trim() || undefined };
}

const orchList = new ServerList({
  table: "#orchs", pager: "#orchs-pager", empty: "no orchestrations match",
  key: (o) => o.id,
  fetch: async (cursor) => {
    const p = await client.orchList({ ...orchFilter(), order: "newest", limit: PAGE, cursor });
    return { items: p.orchestrations, cursor: p.cursor, more: p.more };
  },
  fits: (o) => { const f = orchFilter(); return (!f.status || o.status === f.status) && includes(f.search, o.id, o.name); },
  onLoad: () => { $("#orch-error").textContent = ""; },
  onError: (e) => { $("#orch-error").textContent = errText(e); },
  row: (o) => {
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.id = o.id;
    tr.dataset.status = o.status;
    tr.onclick = () => openOrch(o.id);
    const act = document.createElement("td");
    const cancel = confirmButton("cancel", () => client.orchCancel(o.id).catch((e) => { $("#orch-error").textContent = errText(e); }), "danger");
    cancel.disabled = FINAL.includes(o.status);
    act.append(cancel);
    tr.append(td(o.id, "mono"), td(o.name), td(o.status + (o.error ? " — " + o.error : ""), "status status-" + o.status), td(o.step),
      td((o.waiting_for || "") + (o.prompt ? " " + json(o.prompt) : ""), "json"), td(time(o.updated)), act);
    return tr;
  },
});
$("#orch-status").onchange = () => orchList.first();
$("#orch-search").oninput = debounced(() => orchList.first());
$("#orch-filter").onsubmit = (ev) => { ev.preventDefault(); orchList.first(); };
onShow.orchestrations = () => orchList.load();

// watchOrchestrations follows changes from the newest revision on: the
// pages come from orch.list, the subscription only brings what changes.
async function watchOrchestrations() {
  let from = 1;
  try {
    const newest = await client.orchList({ order: "newest", limit: 1 });
    if (newest.orchestrations.length) { from = newest.orchestrations[0].revision + 1; }
  } catch (e) { $("#orch-error").textContent = errText(e); }
  subscribe("orchs", { topic: "orchestration", from }, (f) => {
    if (f.type !== "orchestration") { return; }
    if (f.deleted) { orchList.remove(f.id); return; }
    orchList.upsert({ ...f.orchestration, revision: f.revision });
  });
}

$("#orch-start-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#orch-error").textContent = "";
  try {
    const input = $("#orch-input").value.trim() ? JSON.parse($("#orch-input").value) : undefined;
    openOrch(await client.orchStart($("#orch-name").value.trim(), input));
  } catch (e) { $("#orch-error").textContent = errText(e); }
};

// ---- one orchestration: facts, input and result, timeline, tasks, worker records

const orch = { id: "", doc: null, caused: new Map() };
const isSupervisor = (r) => (r.effector || "").startsWith("supervisor/");

const timeline = new List({
  table: "#orch-timeline", pager: "#orch-timeline-pager", empty: "no status records yet",
  key: (r) => r.id,
  sort: (a, b) => (a.stored || "").localeCompare(b.stored || "") || a.seq - b.seq,
  row: (r) => {
    const s = r.json || {};
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.event = s.event || "";
    tr.dataset.status = s.status || "";
    tr.onclick = () => openDrawer(`status record ${r.id}`, r);
    tr.append(td(time(r.stored)), td(s.event), td(s.status, "status status-" + s.status), td(s.step),
      td([s.waiting_for, s.worker ? "from " + s.worker : ""].filter(Boolean).join(" · "), "mono"), td(s.error, "wrap"));
    return tr;
  },
});

const tasks = new List({
  table: "#orch-tasks", pager: "#orch-tasks-pager", empty: "no tasks yet",
  key: (r) => r.id,
  sort: (a, b) => (a.stored || "").localeCompare(b.stored || ""),
  row: (r) => {
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.id = r.id;
    tr.onclick = () => openDrawer(`task ${r.id}`, r);
    const caused = (orch.caused.get(r.id) || []).map((w) => `${w.type || "message"} ${payloadText(w)}`).join(" · ");
    tr.append(td(time(r.stored)), td(r.effector, "mono"), td(r.type), td(r.id, "mono"), td(caused || "(none yet)", "json caused"));
    return tr;
  },
});

const workers = new List({
  table: "#orch-workers", pager: "#orch-workers-pager", empty: "no worker records yet",
  key: (r) => r.id,
  sort: (a, b) => (a.stored || "").localeCompare(b.stored || ""),
  row: (r) => {
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.id = r.id;
    tr.dataset.type = r.type || "message";
    tr.onclick = () => openDrawer(`worker record ${r.id}`, r);
    tr.append(td(time(r.stored)), td(r.from || r.effector, "mono"), td(r.type), td(r.id, "mono"), td(r.cause, "mono"), td(payloadText(r), "json"));
    return tr;
  },
});

function openOrch(id) {
  if (orch.id !== id) {
    orch.id = id;
    orch.doc = null;
    orch.caused.clear();
    timeline.clear(); tasks.clear(); workers.clear();
    $("#orch-title").textContent = `orchestration ${id}`;
    $("#orch-facts").replaceChildren();
    $("#orch-prompt").textContent = "";
    $("#orch-start-input").textContent = "";
    $("#orch-result").textContent = "";
    $("#orch-page-error").textContent = "";
    subscribe("orch-one", { topic: "orchestration", id }, (f) => {
      if (f.type !== "orchestration") { return; }
      if (f.deleted) { $("#orch-page-error").textContent = "this orchestration was deleted"; return; }
      showOrch(f.orchestration);
    }, (e) => { $("#orch-page-error").textContent = errText(e); });
    subscribe("orch-log", { topic: "records", process: id }, (f) => {
      for (const r of f.records) {
        if (isSupervisor(r) && r.type === "status" && r.box === "outbox") { timeline.upsert(r); continue; }
        if (!isSupervisor(r) && r.box === "mailbox") { tasks.upsert(r); continue; } // a task, in its worker's mailbox
        // What a worker emitted: in its outbox, or come back to the
        // supervisor's mailbox (from the worker).
        const fromWorker = (r.from && !r.from.startsWith("supervisor/")) || (!isSupervisor(r) && r.box === "outbox");
        if (!fromWorker) { continue; }
        workers.upsert(r);
        if (r.cause) {
          const list = orch.caused.get(r.cause) || [];
          if (!list.some((w) => w.id === r.id)) { list.push(r); }
          orch.caused.set(r.cause, list);
          if (tasks.get(r.cause)) { tasks.schedule(); }
        }
      }
    }, (e) => { $("#orch-page-error").textContent = errText(e); });
  }
  showView("orch", `orch/${encodeURIComponent(id)}`);
}

function showOrch(o) {
  orch.doc = o;
  const facts = $("#orch-facts");
  facts.replaceChildren();
  for (const [k, v] of [["name", o.name], ["status", o.status], ["step", o.step], ["steps", o.steps], ["waiting for", o.waiting_for || "—"],
    ["owner", o.owner || "—"], ["created", time(o.created)], ["updated", time(o.updated)]]) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v === undefined ? "" : String(v);
    dd.dataset.field = k;
    if (k === "status") { dd.className = "status status-" + v; }
    facts.append(dt, dd);
  }
  $("#view-orch").dataset.status = o.status;
  $("#orch-start-input").textContent = o.input !== undefined && o.input !== null ? pretty(o.input) : "(none)";
  const waiting = o.status === "WAITING";
  $("#orch-prompt").textContent = waiting ? (o.prompt !== undefined ? pretty(o.prompt) : "(waits for input; no prompt)") :
    (FINAL.includes(o.status) ? "(finished: takes no more input)" : "(not waiting for input)");
  $("#orch-input-button").disabled = !waiting;
  $("#orch-answer").disabled = !waiting;
  $("#orch-cancel").disabled = FINAL.includes(o.status);
  $("#orch-result").textContent = (o.error ? `FAILED: ${o.error}\n\n` : "") + (o.results !== undefined && o.results !== null ? pretty(o.results) : "(no results yet)");
}

$("#orch-input-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#orch-page-error").textContent = "";
  try {
    await client.orchInput(orch.id, JSON.parse($("#orch-answer").value));
  } catch (e) { $("#orch-page-error").textContent = errText(e); }
};
$("#orch-cancel").onclick = async () => {
  $("#orch-page-error").textContent = "";
  try { await client.orchCancel(orch.id); } catch (e) { $("#orch-page-error").textContent = errText(e); }
};
$("#orch-back").onclick = (ev) => { ev.preventDefault(); showView("orchestrations"); };

// ---- dead letters: replay, discard -------------------------------------------

// Reason codes of dead letters (records.HeaderDeadReason), for the filter.
const DEAD_REASONS = ["decode", "content_type", "oversize", "rejected", "failed", "panic", "redelivered", "cancelled", "no_effector",
  "terminated", "reply_forbidden", "output_too_large", "state_too_large"];
const replayedAs = new Map(); // dead letter seq → the id it was replayed as

// deadFilter reads the filters: "kind" or "kind/id", a reason, a search.
function deadFilter() {
  const who = $("#dead-effector").value.trim();
  return {
    effector: who.includes("/") ? who : undefined, kind: who && !who.includes("/") ? who : undefined,
    reason: $("#dead-reason").value || undefined, text: $("#dead-search").value.trim() || undefined,
  };
}

const deadList = new ServerList({
  table: "#dead", pager: "#dead-pager", empty: "no dead letters match",
  key: (d) => String(d.seq),
  fetch: async (cursor) => {
    const p = await client.deadList({ ...deadFilter(), order: "newest", limit: PAGE, cursor });
    return { items: p.dead, cursor: p.cursor, more: p.more };
  },
  fits: (d) => {
    const f = deadFilter();
    return (!f.effector || d.effector === f.effector) && (!f.kind || d.effector.startsWith(f.kind + "/")) && (!f.reason || d.reason === f.reason) &&
      includes(f.text, d.error, d.reason, d.record.id, d.record.type);
  },
  onLoad: (res, page) => {
    $("#dead-error").textContent = "";
    if (page === 0 && !deadFilter().effector && !deadFilter().kind && !deadFilter().reason && !deadFilter().text) {
      $("#dead-count").textContent = res.items.length + (res.more ? "+" : "");
      $("#dead-count").hidden = res.items.length === 0;
    }
  },
  onError: (e) => { $("#dead-error").textContent = errText(e); },
  row: (d) => {
    const tr = document.createElement("tr");
    tr.className = "clickable";
    tr.dataset.id = d.record.id;
    tr.dataset.seq = d.seq;
    d.replayed = d.replayed || replayedAs.get(d.seq);
    if (d.replayed) { tr.dataset.replayed = d.replayed; }
    tr.onclick = () => openDead(d);
    const act = document.createElement("td");
    act.append(...deadActions(d));
    tr.append(td(d.seq), td(time(d.stored)), td(d.effector, "mono"), td(d.reason), td(d.record.type), td(d.record.id, "mono"), td(d.error),
      td(payloadText(d.record), "json"), act);
    return tr;
  },
});
for (const r of DEAD_REASONS) {
  const o = document.createElement("option");
  o.value = o.textContent = r;
  $("#dead-reason").append(o);
}
for (const id of ["#dead-effector", "#dead-search"]) { $(id).oninput = debounced(() => deadList.first()); }
$("#dead-reason").onchange = () => deadList.first();
$("#dead-filter").onsubmit = (ev) => { ev.preventDefault(); deadList.first(); };
onShow.dead = () => deadList.load();

function deadActions(d) {
  const replay = button(d.replayed ? "replayed ✓" : "replay", async (b) => {
    $("#dead-error").textContent = "";
    b.disabled = true;
    try {
      const res = await client.deadReplay(d.seq);
      d.replayed = res.id;
      replayedAs.set(d.seq, res.id);
      deadList.upsert(d);
      if (!$("#drawer").hidden && $("#drawer").dataset.id === d.record.id) { openDead(d); }
    } catch (e) { $("#dead-error").textContent = `replay #${d.seq}: ${errText(e)}`; b.disabled = false; }
  }, "replay");
  replay.title = d.replayed ? `sent again as ${d.replayed}` : "send the record again, as a new record caused by this one";
  const discard = confirmButton("discard", async () => {
    $("#dead-error").textContent = "";
    try {
      await client.deadDiscard(d.seq);
      deadList.remove(String(d.seq));
      if (!$("#drawer").hidden && $("#drawer").dataset.id === d.record.id) { closeDrawer(); }
    } catch (e) { $("#dead-error").textContent = `discard #${d.seq}: ${errText(e)}`; }
  }, "danger discard");
  discard.title = "delete the dead letter (the original stays in its mailbox stream)";
  return [replay, discard];
}

function openDead(d) {
  openDrawer(`dead letter #${d.seq}`, d.record, {
    facts: [["reason", d.reason], ["error", d.error], ["dead letter", `${d.id} (#${d.seq})`], ["truncated", d.truncated], ["replayed as", d.replayed]],
    actions: deadActions(d),
  });
}

// watchDead follows dead letters stored from the newest on (the pages
// come from dead.list).
async function watchDead() {
  let from = 1;
  try {
    const newest = await client.deadList({ order: "newest", limit: 1 });
    if (newest.dead.length) { from = newest.dead[0].seq + 1; }
  } catch (e) { $("#dead-error").textContent = errText(e); }
  subscribe("dead", { topic: "dead", from }, (f) => {
    if (f.type === "dead") { deadList.upsert(f); }
  });
}

// ---- nodes: placement, partitions, throughput, index lag ------------------

let lastNodes = null; // the previous answer, for the rates
let nodesTimer = 0;

const nodeList = new List({
  table: "#nodes", pager: "#nodes-pager", empty: "no node announces itself", pageSize: 25, flash: false, // polled: no flash
  key: (n) => n.id,
  sort: (a, b) => a.id.localeCompare(b.id),
  filter: (n) => includes($("#nodes-search").value.trim(), n.id, ...(n.kinds || [])),
  row: (n) => {
    const tr = document.createElement("tr");
    tr.dataset.node = n.id;
    const per = new Map();
    for (const p of n.partitions) { per.set(p.kind, [...(per.get(p.kind) || []), p.partition]); }
    const perText = [...per].map(([k, ps]) => `${k}: ${ps.length}`).join(" · ");
    const perTitle = [...per].map(([k, ps]) => `${k}: ${ranges(ps)}`).join("\n");
    const age = (Date.parse(n.now) - Date.parse(n.beat)) / 1000;
    const cellPer = td(perText, "mono per-kind");
    cellPer.title = perTitle;
    tr.append(td(n.id, "mono"), td((n.kinds || []).join(", ")), td(n.partitions.length, "parts"), cellPer, td(n.done, "done"),
      td(n.rate === undefined ? "…" : n.rate.toFixed(1), "rate"), td(n.pending, "pending"), td(isNaN(age) ? "" : `${Math.max(0, age).toFixed(1)} s ago`, age > 3 ? "status-ERROR" : ""));
    return tr;
  },
});
$("#nodes-search").oninput = () => nodeList.refilter();
$("#nodes-filter").onsubmit = (ev) => ev.preventDefault();

function ranges(nums) {
  const s = [...nums].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < s.length; i++) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j] + 1) { j++; }
    out.push(i === j ? String(s[i]) : `${s[i]}–${s[j]}`);
    i = j;
  }
  return out.join(", ");
}

async function pollNodes() {
  clearTimeout(nodesTimer);
  if (currentView !== "nodes") { return; }
  nodesTimer = setTimeout(pollNodes, 2000);
  if (client.status !== "open") { return; }
  let res;
  try { res = await client.nodes(); } catch (e) { $("#nodes-error").textContent = errText(e); return; }
  $("#nodes-error").textContent = "";
  const prev = new Map((lastNodes?.nodes || []).map((n) => [n.id, n]));
  const dt = lastNodes ? (Date.parse(res.time) - Date.parse(lastNodes.time)) / 1000 : 0;
  const seen = new Set();
  for (const n of res.nodes) {
    const p = prev.get(n.id);
    n.now = res.time;
    if (p && dt > 0) { n.rate = Math.max(0, n.done - p.done) / dt; }
    seen.add(n.id);
    nodeList.upsert(n);
  }
  for (const k of [...nodeList.items.keys()]) { if (!seen.has(k)) { nodeList.remove(k); } }
  lastNodes = res;
  $("#nodes-summary").textContent = `index lag ${res.index_lag_error ? "unknown (" + res.index_lag_error + ")" : res.index_lag} · ${res.partitions} partitions per kind · ${res.unheld.length} unheld`;
  $("#nodes-summary").dataset.indexLag = res.index_lag_error ? "" : String(res.index_lag);
  $("#unheld").textContent = res.unheld.length ? "unheld partitions: " + res.unheld.map((p) => `${p.kind}/${p.partition}${p.node ? " (lease of " + p.node + ")" : ""}`).join(", ") : "";
}
onShow.nodes = pollNodes;

// ---- start ----------------------------------------------------------------------

// startLists follows the changes of the gateway's lists, then loads their
// first pages (at the first welcome, and for each new identity): each
// subscription starts after the newest item its list query saw, before the
// page is read, so no change falls between the page and the subscription
// (one may come twice, which only redraws its row).
async function startLists() {
  await Promise.all([watchOrchestrations(), watchDead()]);
  orchList.first();
  deadList.first();
}

// resetAll clears the lists (another identity connected).
function resetAll() {
  for (const l of [logList, orchList, deadList, nodeList, timeline, tasks, workers]) { l.clear(); }
  eff.kinds.clear();
  $("#eff-kind").replaceChildren();
  unsubscribe("state"); unsubscribe("log"); unsubscribe("orch-one"); unsubscribe("orch-log");
  orch.id = "";
  lastNodes = null;
  replayedAs.clear();
  if (currentView === "orch" || currentView === "records") { showView("effectors"); }
}

if (!token()) {
  showTokenForm("No token yet: paste yours if this gateway needs one (or open the page as /#token=…). Connecting meanwhile, in case it needs none.");
}
route();
// Sends kept from before a reload: shown, and re-sent once connected.
client.pendingSends().then((hs) => hs.forEach(showSend), (e) => console.warn("kept sends:", e));
client.connect().catch(() => undefined);
setInterval(() => { if (client.status === "open") { loadKinds(); } }, 10000); // kinds hosted later
