// Builds the console into one directory: index.html, main.js, main.css, favicon.svg.
// `node web/build.mjs OUTDIR`; esbuild from node_modules, no network. config.json is not part of the
// build: each deployment writes its own (BucketDeployment in AWS, the local console front locally).
import { copyFile, mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] ?? path.join(here, "..", "build", "console"));

await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });
await esbuild.build({
  entryPoints: [path.join(here, "src", "main.ts")],
  bundle: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  minify: true,
  sourcemap: "linked",
  // The same input gives the same bytes: no timestamps, no absolute paths in the output.
  sourceRoot: "",
  legalComments: "eof",
  outdir,
  logLevel: "warning",
});
for (const name of ["index.html", "favicon.svg"]) {
  await copyFile(path.join(here, "static", name), path.join(outdir, name));
}
