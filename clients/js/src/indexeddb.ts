// A SendStore in the browser's IndexedDB: unacknowledged sends survive a
// page reload, a closed tab and a browser restart.

import type { PendingSend, SendStore } from "./store.js";

const STORE = "sends";

/**
 * A {@link SendStore} in IndexedDB (database `name`, default
 * `effectors-client`; one object store `sends` keyed by record id). Tabs of
 * one origin that use the same name share the sends: each re-sends them,
 * and the gateway stores each id once.
 */
export class IndexedDBStore implements SendStore {
  private db?: Promise<IDBDatabase>;

  constructor(
    readonly name = "effectors-client",
    private readonly factory: IDBFactory | undefined = globalThis.indexedDB,
  ) {}

  private open(): Promise<IDBDatabase> {
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
        this.db = undefined; // try again next time
      });
    }
    return this.db;
  }

  private async run<T>(mode: IDBTransactionMode, fn: (s: IDBObjectStore) => IDBRequest<T>): Promise<T> {
    const db = await this.open();
    return new Promise<T>((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = fn(tx.objectStore(STORE));
      // Resolve once the transaction is committed, not when the request
      // succeeds: a put must be on disk before the send goes out.
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error ?? req.error ?? new Error("IndexedDBStore: transaction failed"));
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDBStore: transaction aborted"));
    });
  }

  async list(): Promise<PendingSend[]> {
    return (await this.run("readonly", (s) => s.getAll())) as PendingSend[];
  }

  async put(p: PendingSend): Promise<void> {
    await this.run("readwrite", (s) => s.put(p));
  }

  async delete(id: string): Promise<void> {
    await this.run("readwrite", (s) => s.delete(id));
  }
}
