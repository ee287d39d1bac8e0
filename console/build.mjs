// Build the console into dist/: one bundle of src/main.jsx (Preact, uPlot) and its CSS, with
// content-hashed names, and dist/index.html naming them. Deterministic: the same sources and
// lock file give the same bytes (no timestamps, no absolute paths), so `make` rebuilds only
// when something changed and a rebuild of a clean tree changes nothing.
import * as esbuild from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

const dist = "dist";
rmSync(dist, { recursive: true, force: true });
mkdirSync(path.join(dist, "assets"), { recursive: true });

const result = await esbuild.build({
  entryPoints: ["src/main.jsx"],
  bundle: true,
  minify: true,
  sourcemap: false,
  format: "esm",
  target: ["es2020"],
  jsx: "automatic",
  jsxImportSource: "preact",
  outdir: path.join(dist, "assets"),
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((p) => path.basename(p));
const js = outputs.find((f) => f.endsWith(".js"));
const css = outputs.find((f) => f.endsWith(".css"));
const html = readFileSync("index.html", "utf8")
  .replace("%APP_JS%", `assets/${js}`)
  .replace("%APP_CSS%", `assets/${css}`);
writeFileSync(path.join(dist, "index.html"), html);
console.log(`console built: dist/assets/${js}, dist/assets/${css}`);
