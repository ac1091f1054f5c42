// Bundles the browser entry point (src/index.ts) into one ES module for the
// live view (web/assets/effectors-client.js), which embeds it: no build step
// at run time. Usage: node scripts/bundle.mjs <outfile>
import { build } from "esbuild";

const out = process.argv[2];
if (!out) {
  console.error("usage: node scripts/bundle.mjs <outfile>");
  process.exit(2);
}
await build({
  entryPoints: [new URL("../src/index.ts", import.meta.url).pathname],
  outfile: out,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  legalComments: "none",
  banner: {
    js: "// @effectors/client, bundled from clients/js/src by clients/js/scripts/bundle.mjs (npm run build).\n// Do not edit: change clients/js/src and run npm run build in clients/js.",
  },
  logLevel: "warning",
});
