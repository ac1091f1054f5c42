// effectors live record view: plain JavaScript on the gateway's WebSocket
// frame protocol (docs/gateway.md). No build step, no dependencies.
"use strict";

const $ = (sel) => document.querySelector(sel);
const MAX_ROWS = 500;

// ---- connection: auth, reconnect, resume ------------------------------

let ws = null;
let reqSeq = 0;
const pending = new Map();   // req -> {resolve, reject}
const subs = new Map();      // sub -> {frame, resume(frame), onFrame(f)}
const outbox = new Map();    // record id -> {to, record, li}: sends not acked yet
let backoff = 500;

function token() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) { sessionStorage.setItem("ea-token", decodeURIComponent(m[1])); }
  return sessionStorage.getItem("ea-token") || "";
}

function setConn(state, text) {
  const el = $("#conn");
  el.dataset.state = state;
  el.textContent = text;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  ws = new WebSocket(`${proto}//${location.host}/ws`);
  setConn("connecting", "connecting…");
  ws.onopen = () => {
    const t = token();
    if (t) { ws.send(JSON.stringify({ type: "auth", token: t })); }
  };
  ws.onmessage = (ev) => {
    let f;
    try { f = JSON.parse(ev.data); } catch (e) { return; }
    onFrame(f);
  };
  ws.onclose = (ev) => {
    for (const p of pending.values()) { p.reject(new Error("connection closed")); }
    pending.clear();
    if (ev.code === 4401) {
      setConn("closed", "unauthorized: " + ev.reason);
      $("#token-form").hidden = false;
      return;
    }
    setConn("closed", `disconnected (${ev.code}${ev.reason ? ": " + ev.reason : ""}), reconnecting…`);
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 10000);
  };
}

function onFrame(f) {
  switch (f.type) {
  case "welcome":
    backoff = 500;
    setConn("open", `connected · prefix ${f.prefix}`);
    $("#token-form").hidden = true;
    resumeAll();
    return;
  case "result": case "ack": case "pong":
    settle(f, null);
    return;
  case "error":
    if (f.req && pending.has(f.req)) { settle(f, new Error(`${f.code}: ${f.error}`)); return; }
    console.warn("gateway error", f);
    return;
  }
  if (f.sub && subs.has(f.sub)) { subs.get(f.sub).onFrame(f); }
}

function settle(f, err) {
  const p = pending.get(f.req);
  if (!p) { return; }
  pending.delete(f.req);
  if (err) { p.reject(err); } else { p.resolve(f); }
}

// request sends a frame with a fresh req and resolves with its answer.
function request(frame) {
  return new Promise((resolve, reject) => {
    if (!ws || ws.readyState !== WebSocket.OPEN) { reject(new Error("not connected")); return; }
    const req = "r" + (++reqSeq);
    pending.set(req, { resolve, reject });
    ws.send(JSON.stringify({ ...frame, req }));
  });
}

// subscribe registers a subscription; it is (re)sent with its resume
// point on every (re)connect.
function subscribe(name, frame, onFrame) {
  unsubscribe(name);
  const s = { frame: { ...frame, type: "subscribe", sub: name }, onFrame };
  subs.set(name, s);
  if (ws && ws.readyState === WebSocket.OPEN) { ws.send(JSON.stringify(s.frame)); }
  return s;
}

function unsubscribe(name) {
  if (!subs.has(name)) { return; }
  subs.delete(name);
  if (ws && ws.readyState === WebSocket.OPEN) { ws.send(JSON.stringify({ type: "unsubscribe", sub: name })); }
}

function resumeAll() {
  for (const s of subs.values()) { ws.send(JSON.stringify(s.frame)); }
  for (const [id, o] of outbox) { trySend(id, o); }   // same id: stored once
  loadKinds();
}

// ---- helpers ----------------------------------------------------------

const MAX_CELL = 200;

// td makes a cell; long text is cut (the whole of it in the tooltip).
function td(text, cls) {
  const el = document.createElement("td");
  const s = text === undefined || text === null ? "" : String(text);
  el.textContent = s.length > MAX_CELL ? s.slice(0, MAX_CELL) + "…" : s;
  if (s.length > MAX_CELL) { el.title = s; }
  if (cls) { el.className = cls; }
  return el;
}

function json(v) { return v === undefined ? "" : JSON.stringify(v); }

function time(t) {
  if (!t) { return ""; }
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

function cap(tbody) { while (tbody.rows.length > MAX_ROWS) { tbody.deleteRow(tbody.rows.length - 1); } }

function flash(tr) { tr.classList.remove("fresh"); void tr.offsetWidth; tr.classList.add("fresh"); }

// ---- effectors by kind -------------------------------------------------

const kindTables = new Map();

async function loadKinds() {
  let res;
  try { res = await request({ type: "kinds" }); } catch (e) { return; }
  for (const k of res.result.kinds) { watchKind(k.kind, k.nodes); }
}

function watchKind(kind, nodes) {
  if (kindTables.has(kind)) { return; }
  const box = document.createElement("div");
  box.innerHTML = `<h3></h3><table><thead><tr><th>id</th><th>status</th><th>state</th><th>seq</th><th>updated</th></tr></thead><tbody></tbody></table>`;
  box.querySelector("h3").textContent = `${kind} (${nodes.length} node${nodes.length === 1 ? "" : "s"})`;
  box.dataset.kind = kind;
  $("#kinds").appendChild(box);
  const tbody = box.querySelector("tbody");
  kindTables.set(kind, tbody);
  const s = subscribe("state:" + kind, { topic: "state", kind }, (f) => {
    if (f.type !== "state") { return; }
    s.frame.from = f.revision + 1;   // resume after this revision
    let tr = tbody.querySelector(`tr[data-effector="${CSS.escape(f.effector)}"]`);
    if (f.deleted) { if (tr) { tr.remove(); } return; }
    const d = f.document;
    if (!tr) {
      tr = document.createElement("tr");
      tr.className = "clickable";
      tr.dataset.effector = f.effector;
      tr.onclick = () => openLog("effector", f.effector);
      tbody.prepend(tr);
    }
    tr.replaceChildren(td(d.id), td(d.status, "status status-" + d.status), td(json(d.state) + (d.error ? " — " + d.error : ""), "json state"),
      td(d.seq, "seq"), td(time(d.updated)));
    flash(tr);
  });
}

// ---- record log of an effector or a process ---------------------------

function openLog(by, target) {
  $("#log-by").value = by;
  $("#log-target").value = target;
  $("#log-title").textContent = `— ${by} ${target}`;
  for (const tr of document.querySelectorAll("tr.selected")) { tr.classList.remove("selected"); }
  if (by === "effector") {
    const tr = document.querySelector(`tr[data-effector="${CSS.escape(target)}"]`);
    if (tr) { tr.classList.add("selected"); }
    if (!$("#send-to").value) { $("#send-to").value = target; }
  }
  const tbody = $("#log tbody");
  tbody.replaceChildren();
  $("#log-state").textContent = "loading history…";
  const frame = { topic: "records" };
  frame[by] = target;
  const s = subscribe("log", frame, (f) => {
    if (f.type === "error") { $("#log-state").textContent = f.error; return; }
    if (f.type !== "records") { return; }
    s.frame.cursor = f.cursor;   // resume after this page
    for (const r of f.records) {
      const tr = document.createElement("tr");
      tr.dataset.id = r.id;
      tr.dataset.type = r.type || "message";
      tr.append(td(time(r.stored)), td(r.box), td(r.effector), td(r.type || "message"), td(r.from), td(r.cause),
        td(r.priority), td(r.process), td(time(r.time)), td(r.invalid ? "invalid: " + r.invalid : json(r.json), "json"));
      tbody.prepend(tr);
      flash(tr);
    }
    cap(tbody);
    if (f.live) { $("#log-state").textContent = "live"; }
  });
}

$("#log-form").onsubmit = (ev) => {
  ev.preventDefault();
  const target = $("#log-target").value.trim();
  if (target) { openLog($("#log-by").value, target); }
};

// ---- send a record -------------------------------------------------------

function newID() {
  const a = new Uint8Array(12);
  crypto.getRandomValues(a);
  return "ui-" + Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function trySend(id, o) {
  try {
    const ack = await request({ type: "send", to: o.to, record: o.record });
    outbox.delete(id);
    o.li.dataset.sync = "acked";
    o.li.textContent = `${o.to} ${o.record.type} ${id} → ${ack.stream} seq ${ack.seq}${ack.duplicate ? " (stored before)" : ""}`;
  } catch (e) {
    if (String(e.message).startsWith("connection closed") || String(e.message).startsWith("not connected")) {
      return; // stays local_only; re-sent with the same id on reconnect
    }
    outbox.delete(id);
    o.li.dataset.sync = "refused";
    o.li.textContent = `${o.to} ${o.record.type}: ${e.message}`;
  }
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
  const record = { id: newID(), type: $("#send-type").value.trim() || "message", payload };
  if ($("#send-process").value.trim()) { record.process = $("#send-process").value.trim(); }
  if ($("#send-priority").value) { record.priority = $("#send-priority").value; }
  const li = document.createElement("li");
  li.dataset.id = record.id;
  li.dataset.sync = "local_only";
  li.textContent = `${to} ${record.type} ${record.id}`;
  $("#sends").prepend(li);
  while ($("#sends").children.length > 50) { $("#sends").lastChild.remove(); }
  const o = { to, record, li };
  outbox.set(record.id, o);
  trySend(record.id, o);
};

// ---- orchestrations --------------------------------------------------------

function watchOrchestrations() {
  const tbody = $("#orchs tbody");
  const s = subscribe("orchs", { topic: "orchestration" }, (f) => {
    if (f.type !== "orchestration") { return; }
    s.frame.from = f.revision + 1;
    let tr = tbody.querySelector(`tr[data-id="${CSS.escape(f.id)}"]`);
    if (f.deleted) { if (tr) { tr.remove(); } refreshWaiting(); return; }
    const o = f.orchestration;
    if (!tr) {
      tr = document.createElement("tr");
      tr.dataset.id = f.id;
      tbody.prepend(tr);
    }
    const cancel = document.createElement("button");
    cancel.textContent = "cancel";
    cancel.disabled = ["COMPLETED", "FAILED", "CANCELLED"].includes(o.status);
    cancel.onclick = () => request({ type: "orch.cancel", id: f.id }).catch((e) => { $("#orch-error").textContent = e.message; });
    const process = document.createElement("td");
    process.append(cancel);
    tr.dataset.status = o.status;
    tr.replaceChildren(td(o.id), td(o.name), td(o.status + (o.error ? " — " + o.error : ""), "status status-" + o.status), td(o.step),
      td((o.waiting_for || "") + (o.prompt ? " " + json(o.prompt) : ""), "json"), td(time(o.updated)), process);
    tr.className = "clickable";
    tr.onclick = (ev) => { if (ev.target.tagName !== "BUTTON") { openLog("process", o.id); } };
    flash(tr);
    refreshWaiting();
  });
}

function refreshWaiting() {
  const sel = $("#orch-waiting");
  const keep = sel.value;
  sel.replaceChildren();
  for (const tr of document.querySelectorAll('#orchs tr[data-status="WAITING"]')) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = tr.dataset.id;
    sel.append(opt);
  }
  if (keep) { sel.value = keep; }
}

$("#orch-start-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#orch-error").textContent = "";
  try {
    const input = $("#orch-input").value.trim() ? JSON.parse($("#orch-input").value) : undefined;
    await request({ type: "orch.start", name: $("#orch-name").value.trim(), input });
  } catch (e) { $("#orch-error").textContent = e.message; }
};

$("#orch-input-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#orch-error").textContent = "";
  try {
    const id = $("#orch-waiting").value;
    if (!id) { throw new Error("no orchestration waits for input"); }
    await request({ type: "orch.input", id, input: JSON.parse($("#orch-answer").value) });
  } catch (e) { $("#orch-error").textContent = e.message; }
};

// ---- dead letters ------------------------------------------------------------

function watchDead() {
  const tbody = $("#dead tbody");
  const s = subscribe("dead", { topic: "dead", from: 1 }, (f) => {
    if (f.type !== "dead") { return; }
    s.frame.from = f.seq + 1;
    const tr = document.createElement("tr");
    tr.dataset.id = f.record.id;
    tr.append(td(time(f.stored)), td(f.effector), td(f.reason), td(f.error), td(f.record.type),
      td(f.record.invalid ? f.record.invalid : json(f.record.json), "json"));
    tbody.prepend(tr);
    cap(tbody);
  });
}

// ---- start --------------------------------------------------------------------

$("#token-form").onsubmit = (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("ea-token", $("#token").value);
  connect();
};

watchOrchestrations();
watchDead();
connect();
setInterval(() => { if (ws && ws.readyState === WebSocket.OPEN) { loadKinds(); } }, 10000); // kinds hosted later
