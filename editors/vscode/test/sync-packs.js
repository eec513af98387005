// The grammar is snapshot-tested over the bundled example packs too. The snapshot tool
// writes `<sample>.snap` beside each sample, so the packs are mirrored into
// test/grammar/packs/; this check fails when a mirror is missing or differs from
// packs/, so the snapshots always cover the packs as they are.
// `node test/sync-packs.js --write` refreshes the mirrors (then `npm run test:update`).
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const packsRoot = path.join(__dirname, '..', '..', '..', 'packs');
const mirror = path.join(__dirname, 'grammar', 'packs');
const write = process.argv.includes('--write');

function packsIn(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...packsIn(full));
    else if (entry.name.endsWith('.ctxpack')) out.push(full);
  }
  return out.sort();
}

const packs = packsIn(packsRoot);
if (packs.length === 0) {
  console.error(`no packs under ${packsRoot}`);
  process.exit(1);
}
fs.mkdirSync(mirror, { recursive: true });
let problems = 0;
const names = new Set();
for (const pack of packs) {
  const name = path.basename(pack);
  names.add(name);
  const copy = path.join(mirror, name);
  const source = fs.readFileSync(pack, 'utf8');
  if (write) {
    fs.writeFileSync(copy, source);
  } else if (!fs.existsSync(copy) || fs.readFileSync(copy, 'utf8') !== source) {
    console.error(`test/grammar/packs/${name} differs from ${path.relative(process.cwd(), pack)} (run \`node test/sync-packs.js --write\`, then \`npm run test:update\`)`);
    problems += 1;
  }
}
for (const name of fs.readdirSync(mirror)) {
  if (name.endsWith('.ctxpack') && !names.has(name)) {
    if (write) fs.rmSync(path.join(mirror, name));
    else {
      console.error(`test/grammar/packs/${name} mirrors no pack; delete it`);
      problems += 1;
    }
  }
}
process.exit(problems === 0 ? 0 : 1);
