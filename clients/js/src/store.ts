// Where unacknowledged sends are kept until their ack: a small pluggable
// interface, a memory store, and (indexeddb.ts, node.ts) durable ones.

import type { EffectorRef, OutRecord } from "./frames.js";

/** A send not yet acknowledged by the gateway (`local_only`), as a {@link SendStore} keeps it. */
export interface PendingSend {
  /** The record id: the key, and what the gateway deduplicates re-sends by. */
  id: string;
  /** The effector it goes to, `<kind>/<id>`. */
  to: EffectorRef;
  /** The record as sent, `id` included. */
  record: OutRecord & { id: string };
  /** When it was first sent (ms since the epoch). */
  created: number;
  /** Orders the sends of one client: re-sends go in this order. */
  order: number;
}

/**
 * Keeps the sends not yet acknowledged. The client puts a send before it
 * goes on the wire, deletes it on its ack (or on a refusal), and lists them
 * at start to send them again. Implementations must keep what was put once
 * put resolves; calls may overlap.
 */
export interface SendStore {
  /** Every send kept, in any order. */
  list(): Promise<PendingSend[]>;
  /** Keeps p, replacing a send with the same id. */
  put(p: PendingSend): Promise<void>;
  /** Forgets the send with this id (no error when there is none). */
  delete(id: string): Promise<void>;
}

/** A {@link SendStore} in memory: sends survive reconnects, not a restart. */
export class MemoryStore implements SendStore {
  private readonly sends = new Map<string, PendingSend>();

  async list(): Promise<PendingSend[]> {
    return [...this.sends.values()].map((p) => structuredClone(p));
  }

  async put(p: PendingSend): Promise<void> {
    this.sends.set(p.id, structuredClone(p));
  }

  async delete(id: string): Promise<void> {
    this.sends.delete(id);
  }
}
