// Global setup of the tests: a real ea-node (embedded NATS with JetStream,
// the example kinds, the record store) and a real ea-supervisor serving the
// gateway with a token, as processes (test/deployment.ts). The binaries come
// from $EA_NODE_BIN and $EA_SUPERVISOR_BIN (the Go test clients/js/js_test.go
// builds them), else from go build of this repository; the files get their
// paths too, to start deployments of their own.

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

import { type Binaries, startDeployment } from "./deployment.js";

declare module "vitest" {
  export interface ProvidedContext {
    gateway: { host: string; token: string; nats: string };
    binaries: Binaries;
  }
}

const repo = resolve(import.meta.dirname, "..", "..", "..");

function binary(env: string, pkg: string, dir: string): string {
  const given = process.env[env];
  if (given) {
    return given;
  }
  const out = join(dir, pkg.split("/").pop()!);
  execFileSync("go", ["build", "-o", out, "./" + pkg], { cwd: repo, stdio: "inherit" });
  return out;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), "effectors-client-bin-"));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  let bin: Binaries;
  let d: Awaited<ReturnType<typeof startDeployment>>;
  try {
    bin = { node: binary("EA_NODE_BIN", "cmd/node", dir), supervisor: binary("EA_SUPERVISOR_BIN", "cmd/supervisor", dir) };
    d = await startDeployment(bin);
  } catch (err) {
    cleanup();
    throw err;
  }
  project.provide("gateway", { host: d.host, token: d.token, nats: d.nats });
  project.provide("binaries", bin);
  return async () => {
    await d.stop();
    cleanup();
  };
}
