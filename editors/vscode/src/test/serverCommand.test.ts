// Unit tests for the launch logic that can run without VS Code (`npm run test:unit`).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { DEFAULT_SERVER, findExecutable, resolvePath, resolveServerCommand } from '../serverCommand';

const root = path.join(os.tmpdir(), 'workspace');

describe('resolveServerCommand', () => {
  it('falls back to ctxpack-lsp on PATH with no arguments', () => {
    assert.deepEqual(resolveServerCommand({ path: '', extraArgs: [], registry: '' }, root), {
      command: DEFAULT_SERVER,
      args: [],
    });
    assert.equal(resolveServerCommand({ path: '   ', extraArgs: [], registry: '' }, undefined).command, 'ctxpack-lsp');
  });

  it('passes the registry as --registry DIR, before the extra arguments', () => {
    const command = resolveServerCommand(
      { path: '/opt/ctxpack/bin/ctxpack-lsp', extraArgs: ['--log', 'debug', 42, null], registry: '/srv/registry' },
      root,
    );
    assert.deepEqual(command, {
      command: '/opt/ctxpack/bin/ctxpack-lsp',
      args: ['--registry', '/srv/registry', '--log', 'debug'],
    });
  });

  it('anchors relative paths at the workspace', () => {
    const command = resolveServerCommand(
      { path: './target/debug/ctxpack-lsp', extraArgs: [], registry: 'registry' },
      root,
    );
    assert.equal(command.command, path.join(root, 'target', 'debug', 'ctxpack-lsp'));
    assert.deepEqual(command.args, ['--registry', path.join(root, 'registry')]);
  });

  it('leaves relative paths alone without a workspace', () => {
    const command = resolveServerCommand({ path: 'bin/ctxpack-lsp', extraArgs: [], registry: 'registry' }, undefined);
    assert.deepEqual(command, { command: 'bin/ctxpack-lsp', args: ['--registry', 'registry'] });
  });
});

describe('resolvePath', () => {
  it('expands ~ and ${workspaceFolder}', () => {
    assert.equal(resolvePath('~/bin/ctxpack-lsp', root, false), path.join(os.homedir(), 'bin', 'ctxpack-lsp'));
    assert.equal(resolvePath('~', root, true), os.homedir());
    assert.equal(resolvePath('${workspaceFolder}/registry', root, true), path.join(root, 'registry'));
  });

  it('keeps a bare program name for the PATH lookup', () => {
    assert.equal(resolvePath('ctxpack-lsp-nightly', root, false), 'ctxpack-lsp-nightly');
  });
});

describe('findExecutable', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxpack-vscode-'));
  const binary = path.join(dir, 'ctxpack-lsp');
  fs.writeFileSync(binary, '#!/bin/sh\n', { mode: 0o755 });
  const plainFile = path.join(dir, 'not-executable');
  fs.writeFileSync(plainFile, '', { mode: 0o644 });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('finds a bare name on PATH', () => {
    assert.equal(findExecutable('ctxpack-lsp', { PATH: ['/nonexistent', dir].join(':') }, 'linux'), binary);
  });

  it('reports a missing binary', () => {
    assert.equal(findExecutable('ctxpack-lsp', { PATH: '/nonexistent' }, 'linux'), undefined);
    assert.equal(findExecutable('ctxpack-lsp', {}, 'linux'), undefined);
    assert.equal(findExecutable(path.join(dir, 'missing'), { PATH: dir }, 'linux'), undefined);
  });

  it('checks an explicit path without searching PATH', () => {
    assert.equal(findExecutable(binary, { PATH: '' }, 'linux'), binary);
    assert.equal(findExecutable(dir, { PATH: '' }, 'linux'), undefined, 'a directory is not a binary');
  });

  it('rejects a file without the executable bit', { skip: process.platform === 'win32' }, () => {
    assert.equal(findExecutable(plainFile, {}, 'linux'), undefined);
  });
});
