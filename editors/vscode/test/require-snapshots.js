// Fails when a grammar sample has no checked-in snapshot.
//
// `vscode-tmgrammar-snap` writes a missing `.snap` and reports success, so without this
// check a new sample (or a deleted snapshot) would pass CI without testing anything.
// Run `npm run test:update` to create the snapshot, review it, and commit it.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const dir = path.join(__dirname, 'grammar');
const samples = fs.readdirSync(dir).filter((name) => name.endsWith('.ctxpack'));
const missing = samples.filter((name) => !fs.existsSync(path.join(dir, `${name}.snap`)));
const orphans = fs
  .readdirSync(dir)
  .filter((name) => name.endsWith('.ctxpack.snap') && !samples.includes(name.slice(0, -'.snap'.length)));

if (samples.length === 0) {
  console.error(`no grammar samples in ${dir}`);
  process.exit(1);
}
for (const name of missing) {
  console.error(`missing snapshot for test/grammar/${name} (run \`npm run test:update\`, review, commit)`);
}
for (const name of orphans) {
  console.error(`snapshot test/grammar/${name} has no sample; delete it`);
}
process.exit(missing.length + orphans.length === 0 ? 0 : 1);
