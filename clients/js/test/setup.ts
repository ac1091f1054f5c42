// Global setup of the tests: a real ea-node (embedded NATS with JetStream,
// the example kinds, the record store) and a real ea-supervisor serving the
// gateway with a token, as processes. The binaries come from
// $EA_NODE_BIN and $EA_SUPERVISOR_BIN (the Go test clients/js/js_test.go
// builds them), else from go build of this repository.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    gateway: { host: string; token: string; nats: string };
  }
}

const repo = resolve(import.meta.dirname, "..", "..", "..");

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

function binary(env: string, pkg: string, dir: string): string {
  const given = process.env[env];
  if (given) {
    return given;
  }
  const out = join(dir, pkg.split("/").pop()!);
  execFileSync("go", ["build", "-o", out, "./" + pkg], { cwd: repo, stdio: "inherit" });
  return out;
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

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), "effectors-client-"));
  const nodeBin = binary("EA_NODE_BIN", "cmd/node", dir);
  const supBin = binary("EA_SUPERVISOR_BIN", "cmd/supervisor", dir);
  const [natsPort, nodeMetrics, supMetrics, gwPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const token = "js-client-test-token";
  writeFileSync(join(dir, "token"), token + "\n", { mode: 0o600 });
  // No EA_* variable of this process leaks into the children.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EA_")));
  const procs: { name: string; proc: ChildProcess; log: string }[] = [];
  const start = (name: string, bin: string, args: string[]) => {
    const log = join(dir, name + ".log");
    const fd = openSync(log, "w");
    const proc = spawn(bin, args, { env, stdio: ["ignore", fd, fd] });
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
    const node = start("ea-node", nodeBin, [
      "--listen", `127.0.0.1:${natsPort}`, "--store", join(dir, "data"), "--metrics", `127.0.0.1:${nodeMetrics}`,
    ]);
    await ready("ea-node", `http://127.0.0.1:${nodeMetrics}/readyz`, node.proc, node.log, 90_000);
    const sup = start("ea-supervisor", supBin, [
      "--nats", `nats://127.0.0.1:${natsPort}`, "--metrics", `127.0.0.1:${supMetrics}`,
      "--gateway", `127.0.0.1:${gwPort}`, "--gateway-token-file", join(dir, "token"),
    ]);
    await ready("ea-supervisor", `http://127.0.0.1:${supMetrics}/readyz`, sup.proc, sup.log, 90_000);
  } catch (err) {
    await stop();
    throw err;
  }
  project.provide("gateway", { host: `127.0.0.1:${gwPort}`, token, nats: `nats://127.0.0.1:${natsPort}` });
  return stop;
}
