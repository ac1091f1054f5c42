// effectors live record view: plain JavaScript on the gateway's WebSocket
// frame protocol (docs/gateway.md), spoken by @effectors/client
// (clients/js), bundled into effectors-client.js. No build step here.

import { Client, IndexedDBStore } from "./effectors-client.js";

const $ = (sel) => document.querySelector(sel);
const MAX_ROWS = 500;

// ---- connection: auth, reconnect, resume (the client does them) ---------

function token() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) { sessionStorage.setItem("ea-token", decodeURIComponent(m[1])); }
  return sessionStorage.getItem("ea-token") || "";
}

const proto = location.protocol === "https:" ? "wss:" : "ws:";
const client = new Client({
  url: `${proto}//${location.host}/ws`,
  token,
  // Sends not acked yet are kept in IndexedDB: a reload re-sends them.
  store: new IndexedDBStore("effectors-live-view"),
  idPrefix: "ui-",
  reconnect: { initialDelay: 500, maxDelay: 10000 },
});
// The current WebSocket, for the console (closing it is a dropped
// connection: the client reconnects and resumes).
Object.defineProperty(window, "ws", { get: () => client.socket });
window.effectors = client;

function setConn(state, text) {
  const el = $("#conn");
  el.dataset.state = state;
  el.textContent = text;
}

let unauthorized = "";
client.on("error", (e) => {
  if (e.code === "unauthorized") { unauthorized = e.message; return; }
  console.warn("gateway:", e);
});
client.on("status", (s) => {
  switch (s) {
  case "connecting": setConn("connecting", "connecting…"); return;
  case "open": setConn("open", `connected · prefix ${client.welcome.prefix}`); $("#token-form").hidden = true; return;
  case "reconnecting": setConn("closed", "disconnected, reconnecting…"); return;
  case "unauthorized":
    setConn("closed", unauthorized || "unauthorized");
    $("#token-form").hidden = false;
    return;
  default: setConn("closed", s);
  }
});
client.on("welcome", () => loadKinds());

// request sends a request frame and resolves with its answer's result;
// errors carry the gateway's code.
const request = (frame) => client.request(frame);
const errText = (e) => (e.code ? `${e.code}: ${e.message}` : e.message);

// subscribe registers a subscription, replacing one of the same name; the
// client resumes it from its last seq, revision or cursor after a
// reconnect.
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
  for (const k of res.kinds) { watchKind(k.kind, k.nodes); }
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
  subscribe("state:" + kind, { topic: "state", kind }, (f) => {
    if (f.type !== "state") { return; }
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
  subscribe("log", frame, (f) => {
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
  }, (e) => { $("#log-state").textContent = errText(e); });
}

$("#log-form").onsubmit = (ev) => {
  ev.preventDefault();
  const target = $("#log-target").value.trim();
  if (target) { openLog($("#log-by").value, target); }
};

// ---- send a record -------------------------------------------------------

// li shows a send and its sync state: local_only until the ack, then
// acked (or refused).
function sendItem(h) {
  let li = $(`#sends li[data-id="${CSS.escape(h.id)}"]`);
  if (!li) {
    li = document.createElement("li");
    li.dataset.id = h.id;
    $("#sends").prepend(li);
    while ($("#sends").children.length > 50) { $("#sends").lastChild.remove(); }
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

// ---- orchestrations --------------------------------------------------------

function watchOrchestrations() {
  const tbody = $("#orchs tbody");
  subscribe("orchs", { topic: "orchestration" }, (f) => {
    if (f.type !== "orchestration") { return; }
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
    cancel.onclick = () => request({ type: "orch.cancel", id: f.id }).catch((e) => { $("#orch-error").textContent = errText(e); });
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
  } catch (e) { $("#orch-error").textContent = errText(e); }
};

$("#orch-input-form").onsubmit = async (ev) => {
  ev.preventDefault();
  $("#orch-error").textContent = "";
  try {
    const id = $("#orch-waiting").value;
    if (!id) { throw new Error("no orchestration waits for input"); }
    await request({ type: "orch.input", id, input: JSON.parse($("#orch-answer").value) });
  } catch (e) { $("#orch-error").textContent = errText(e); }
};

// ---- dead letters ------------------------------------------------------------

function watchDead() {
  const tbody = $("#dead tbody");
  subscribe("dead", { topic: "dead", from: 1 }, (f) => {
    if (f.type !== "dead") { return; }
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
  client.connect().catch(() => undefined);
};

watchOrchestrations();
watchDead();
// Sends kept from before a reload: shown, and re-sent once connected.
client.pendingSends().then((hs) => hs.forEach(showSend), (e) => console.warn("kept sends:", e));
client.connect().catch(() => undefined);
setInterval(() => { if (client.status === "open") { loadKinds(); } }, 10000); // kinds hosted later
