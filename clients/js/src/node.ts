// The Node.js entry point: everything of the package, and FileStore, which
// keeps unacknowledged sends in a file so that they survive a restart.

import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

import type { PendingSend, SendStore } from "./store.js";

export * from "./index.js";

/**
 * A {@link SendStore} in one JSON file: unacknowledged sends survive a
 * process restart. Every change rewrites the file (written to `<path>.tmp`,
 * then renamed over it), which suits the few sends a client has in flight.
 * One process at a time may use a file.
 */
export class FileStore implements SendStore {
  private sends?: Map<string, PendingSend>;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(readonly path: string) {}

  private async load(): Promise<Map<string, PendingSend>> {
    if (!this.sends) {
      let list: PendingSend[] = [];
      try {
        const text = await readFile(this.path, "utf8");
        const parsed: unknown = JSON.parse(text);
        if (!Array.isArray(parsed)) {
          throw new Error(`FileStore: ${this.path} does not hold a JSON array of sends; move it away to start afresh`);
        }
        list = parsed as PendingSend[];
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
          throw err;
        }
      }
      this.sends = new Map(list.map((p) => [p.id, p]));
    }
    return this.sends;
  }

  // serial runs fn after every earlier call, so that writes never interleave.
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async save(sends: Map<string, PendingSend>): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    const tmp = this.path + ".tmp";
    await writeFile(tmp, JSON.stringify([...sends.values()]), { mode: 0o600 });
    await rename(tmp, this.path);
  }

  list(): Promise<PendingSend[]> {
    return this.serial(async () => [...(await this.load()).values()].map((p) => structuredClone(p)));
  }

  put(p: PendingSend): Promise<void> {
    return this.serial(async () => {
      const sends = await this.load();
      sends.set(p.id, structuredClone(p));
      await this.save(sends);
    });
  }

  delete(id: string): Promise<void> {
    return this.serial(async () => {
      const sends = await this.load();
      if (sends.delete(id)) {
        await this.save(sends);
      }
    });
  }
}
