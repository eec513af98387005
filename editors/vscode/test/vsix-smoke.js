// Smoke test of a packaged extension, run by ci.sh on the unpacked .vsix.
//
//   node test/vsix-smoke.js UNPACKED_VSIX/extension
//
// VS Code cannot be downloaded here, so this loads the packaged `out/extension.js` under
// plain Node with a stand-in for the `vscode` module, and lets the packaged
// vscode-languageclient launch a fake `ctxpack-lsp` that speaks LSP over stdio. It proves
// that the package holds every module needed at run time, that the server is launched
// as `ctxpack-lsp --registry DIR` (and without the `--stdio` the client adds when a
// transport is named), that the restart command stops the old server before starting a
// new one, that a missing binary produces one clear error message, and that a server
// which dies at startup is not restarted over and over.
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const Module = require('node:module');
const os = require('node:os');
const path = require('node:path');

const extensionDir = path.resolve(process.argv[2] ?? '');
if (!fs.existsSync(path.join(extensionDir, 'package.json'))) {
  console.error('usage: node test/vsix-smoke.js UNPACKED_VSIX/extension');
  process.exit(2);
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxpack-vsix-smoke-'));
const workspace = path.join(scratch, 'workspace');
const binDir = path.join(scratch, 'bin');
const launches = path.join(scratch, 'launches.log');
fs.mkdirSync(workspace);
fs.mkdirSync(binDir);

// The fake server uses the packaged vscode-jsonrpc, so a missing one fails here too.
fs.writeFileSync(
  path.join(binDir, 'ctxpack-lsp'),
  `#!${process.execPath}
const rpc = require(${JSON.stringify(path.join(extensionDir, 'node_modules/vscode-jsonrpc/node.js'))});
const fs = require('fs');
const log = (line) => fs.appendFileSync(${JSON.stringify(launches)}, line + '\\n');
log('start ' + JSON.stringify(process.argv.slice(2)));
const connection = rpc.createMessageConnection(new rpc.StreamMessageReader(process.stdin), new rpc.StreamMessageWriter(process.stdout));
connection.onRequest('initialize', () => ({ capabilities: { textDocumentSync: 1 } }));
connection.onRequest('shutdown', () => { log('shutdown'); return null; });
connection.onNotification('exit', () => process.exit(0));
connection.listen();
`,
  { mode: 0o755 },
);

// A server that dies before it answers `initialize`, as a broken build would.
const brokenServer = path.join(binDir, 'broken-lsp');
fs.writeFileSync(brokenServer, `#!${process.execPath}\nprocess.exit(3);\n`, { mode: 0o755 });

// ---- a stand-in for the `vscode` module ------------------------------------------------

const errors = [];
const commands = new Map();
const settings = { 'server.path': '', 'server.extraArgs': [], registry: 'registry' };

/** Any API the test does not care about: every property and call yields another stub. */
function anything(name) {
  return new Proxy(function () {}, {
    get: (_target, key) => (key === 'then' ? undefined : anything(`${name}.${String(key)}`)),
    apply: () => anything(`${name}()`),
    construct: () => anything(`new ${name}`),
  });
}

function withDefaults(name, members) {
  return new Proxy(members, {
    get: (target, key) => (key in target ? target[key] : anything(`${name}.${String(key)}`)),
  });
}

const vscode = withDefaults('vscode', {
  version: '1.82.0',
  window: withDefaults('window', {
    createOutputChannel: () => ({
      name: 'ctxpack',
      append() {},
      appendLine() {},
      replace() {},
      clear() {},
      show() {},
      hide() {},
      dispose() {},
    }),
    showErrorMessage: async (message) => {
      errors.push(message);
      return undefined;
    },
  }),
  workspace: withDefaults('workspace', {
    workspaceFolders: [{ uri: { scheme: 'file', fsPath: workspace }, name: 'workspace', index: 0 }],
    getConfiguration: () => ({ get: (key, fallback) => (key in settings ? settings[key] : fallback) }),
  }),
  commands: withDefaults('commands', {
    registerCommand: (id, callback) => {
      commands.set(id, callback);
      return { dispose() {} };
    },
    executeCommand: async () => undefined,
  }),
});

// The extension host logs unhandled rejections instead of exiting, and
// vscode-languageclient leaves some behind when a server dies during startup.
process.on('unhandledRejection', (reason) => {
  console.log(`note: unhandled rejection (logged, as the extension host would): ${reason?.message ?? reason}`);
});

const load = Module._load;
Module._load = function (request, ...rest) {
  return request === 'vscode' ? vscode : load.call(this, request, ...rest);
};

// ---- the test ----------------------------------------------------------------------------

async function waitFor(predicate, what) {
  for (let i = 0; i < 100; i++) {
    if (predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const readLaunches = () => (fs.existsSync(launches) ? fs.readFileSync(launches, 'utf8').trim().split('\n') : []);

async function main() {
  const extension = require(path.join(extensionDir, 'out/extension.js'));
  const expectedStart = `start ${JSON.stringify(['--registry', path.join(workspace, 'registry')])}`;
  const originalPath = process.env.PATH;

  process.env.PATH = `${binDir}${path.delimiter}${originalPath}`;
  extension.activate({ subscriptions: [] });
  await waitFor(() => readLaunches().length === 1, 'the server to start');
  await commands.get('ctxpack.restartServer')();
  await extension.deactivate();
  assert.deepEqual(readLaunches(), [expectedStart, 'shutdown', expectedStart, 'shutdown']);
  assert.deepEqual(errors, []);

  process.env.PATH = path.join(scratch, 'empty');
  extension.activate({ subscriptions: [] });
  await waitFor(() => errors.length > 0, 'the error message');
  await extension.deactivate();
  assert.equal(errors.length, 1);
  assert.match(errors[0], /`ctxpack-lsp` was not found on PATH.*`ctxpack\.server\.path`/);
  process.env.PATH = originalPath;

  // The client's own "couldn't create connection" plus ours; no restart storm.
  errors.length = 0;
  settings['server.path'] = brokenServer;
  extension.activate({ subscriptions: [] });
  await waitFor(() => errors.some((message) => message.startsWith('Could not start')), 'the error message');
  await new Promise((resolve) => setTimeout(resolve, 500));
  await extension.deactivate();
  assert.ok(errors.length <= 2, `expected at most two messages, got ${JSON.stringify(errors, null, 2)}`);
  assert.match(errors.at(-1), /Could not start the ctxpack language server `.*broken-lsp`/);

  console.log('vsix smoke test: ok');
}

main()
  .catch((error) => {
    console.error('vsix smoke test failed:', error);
    process.exitCode = 1;
  })
  .finally(() => fs.rmSync(scratch, { recursive: true, force: true }));
