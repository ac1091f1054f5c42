// A deployment of the tests: a real ea-node (embedded NATS with JetStream,
// the example kinds, the record store) and a real ea-supervisor serving the
// gateway with a token, as processes with their data in a temporary folder.
// The global setup starts one for every file; a file that needs another
// layout (stream groups) starts its own.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The binaries a deployment runs. */
export interface Binaries {
  node: string;
  supervisor: string;
}

/** A running deployment: where its gateway and NATS listen, and what stops it. */
export interface Deployment {
  /** The gateway's host:port. */
  host: string;
  token: string;
  nats: string;
  /** Stops both processes (SIGTERM, then SIGKILL after 15 s) and removes the folder (unless $EA_KEEP_TMP). */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

async function ready(name: string, url: string, proc: ChildProcess, log: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) {
      throw new Error(`${name} exited with status ${proc.exitCode}:\n${readFileSync(log, "utf8").slice(-4000)}`);
    }
    try {
      const r = await fetch(url);
      if (r.status === 200) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} not ready at ${url} within ${timeoutMs} ms:\n${readFileSync(log, "utf8").slice(-4000)}`);
}

/**
 * Starts ea-node (with nodeArgs added, such as `--stream-groups 3`) and
 * ea-supervisor serving the gateway, and resolves once both are ready. A
 * port found free can be taken by another process before ours binds it
 * (other packages' tests run beside these): then it starts again on new
 * ports, up to three times.
 */
export async function startDeployment(bin: Binaries, opts: { nodeArgs?: string[] } = {}): Promise<Deployment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(bin, opts);
    } catch (err) {
      if (attempt === 3 || !String(err).includes("address already in use")) {
        throw err;
      }
    }
  }
}

async function startOnce(bin: Binaries, opts: { nodeArgs?: string[] }): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "effectors-client-"));
  const [natsPort, nodeMetrics, supMetrics, gwPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const token = "js-client-test-token";
  writeFileSync(join(dir, "token"), token + "\n", { mode: 0o600 });
  // No EA_* variable of this process leaks into the children.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EA_")));
  const procs: { name: string; proc: ChildProcess; log: string }[] = [];
  const start = (name: string, path: string, args: string[]) => {
    const log = join(dir, name + ".log");
    const fd = openSync(log, "w");
    const proc = spawn(path, args, { env, stdio: ["ignore", fd, fd] });
    procs.push({ name, proc, log });
    return { proc, log };
  };
  const stop = async () => {
    for (const { proc } of procs) {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
      }
    }
    for (const { name, proc, log } of procs) {
      if (proc.exitCode === null) {
        const exited = await Promise.race([
          new Promise<boolean>((r) => proc.once("exit", () => r(true))),
          new Promise<boolean>((r) => setTimeout(() => r(false), 15_000)),
        ]);
        if (!exited) {
          console.error(`${name} did not stop within 15 s of SIGTERM: killed\n${readFileSync(log, "utf8").slice(-2000)}`);
          proc.kill("SIGKILL");
        }
      }
    }
    if (!process.env.EA_KEEP_TMP) {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    const node = start("ea-node", bin.node, [
      "--listen", `127.0.0.1:${natsPort}`, "--store", join(dir, "data"), "--metrics", `127.0.0.1:${nodeMetrics}`,
      ...(opts.nodeArgs ?? []),
    ]);
    await ready("ea-node", `http://127.0.0.1:${nodeMetrics}/readyz`, node.proc, node.log, 90_000);
    const sup = start("ea-supervisor", bin.supervisor, [
      "--nats", `nats://127.0.0.1:${natsPort}`, "--metrics", `127.0.0.1:${supMetrics}`,
      "--gateway", `127.0.0.1:${gwPort}`, "--gateway-token-file", join(dir, "token"),
    ]);
    await ready("ea-supervisor", `http://127.0.0.1:${supMetrics}/readyz`, sup.proc, sup.log, 90_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { host: `127.0.0.1:${gwPort}`, token, nats: `nats://127.0.0.1:${natsPort}`, stop };
}
