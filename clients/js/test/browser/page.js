// The browser test's page: an application of the bundled package
// (/effectors-client.js, built from src) keeping its sends in IndexedDB.
import { Client, IndexedDBStore } from "/effectors-client.js";

const q = new URLSearchParams(location.search);
const client = new Client({
  url: `ws://${location.host}/ws`,
  token: q.get("token") ?? undefined,
  store: new IndexedDBStore("effectors-page-test"),
  idPrefix: "page-",
  reconnect: { initialDelay: 50, maxDelay: 300 },
});

// Every send event since this page loaded, and each send as a list item.
const events = [];
function show(u) {
  events.push({ id: u.id, status: u.status, duplicate: !!u.ack?.duplicate, seq: u.ack?.seq, code: u.error?.code });
  let li = document.querySelector(`li[data-id="${u.id}"]`);
  if (!li) {
    li = document.createElement("li");
    li.dataset.id = u.id;
    document.querySelector("#sends").append(li);
  }
  li.dataset.sync = u.status;
  li.textContent = `${u.to} ${u.record.type} ${u.id}: ${u.status}${u.ack ? ` seq ${u.ack.seq}${u.ack.duplicate ? " (stored before)" : ""}` : ""}`;
}
client.on("send", show);
client.on("status", (s) => {
  document.body.dataset.status = s;
  document.querySelector("#status").textContent = s;
});

window.events = events;
window.sendInc = async (to, by) => {
  const h = client.send(to, { type: "inc", payload: { by } });
  await h.saved;
  return h.id;
};
window.count = async (to) => (await client.state(to)).state.count;
// The sends this page found kept from before (restored from IndexedDB).
window.restored = client.pendingSends().then((hs) => hs.map((h) => ({ id: h.id, status: h.status })));
client.connect().catch(() => undefined);
