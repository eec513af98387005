// Fails when a grammar sample has no checked-in snapshot.
//
// `vscode-tmgrammar-snap` writes a missing `.snap` and reports success, so without this
// check a new sample (or a deleted snapshot) would pass CI without testing anything.
// Run `npm run test:update` to create the snapshot, review it, and commit it.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

let problems = 0;
for (const sub of ['', 'packs']) {
  const dir = path.join(__dirname, 'grammar', sub);
  if (!fs.existsSync(dir)) continue;
  const rel = path.join('test/grammar', sub);
  const samples = fs.readdirSync(dir).filter((name) => name.endsWith('.ctxpack'));
  const missing = samples.filter((name) => !fs.existsSync(path.join(dir, `${name}.snap`)));
  const orphans = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.ctxpack.snap') && !samples.includes(name.slice(0, -'.snap'.length)));
  if (samples.length === 0) {
    console.error(`no grammar samples in ${dir}`);
    problems += 1;
  }
  for (const name of missing) {
    console.error(`missing snapshot for ${rel}/${name} (run \`npm run test:update\`, review, commit)`);
  }
  for (const name of orphans) {
    console.error(`snapshot ${rel}/${name} has no sample; delete it`);
  }
  problems += missing.length + orphans.length;
}
process.exit(problems === 0 ? 0 : 1);
