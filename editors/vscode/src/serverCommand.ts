/**
 * Turns the `ctxpack.*` settings into the command line that launches the language server.
 *
 * This module does not import `vscode`, so its logic is unit-tested under plain Node
 * (`src/test/serverCommand.test.ts`); `client.ts` reads the settings and passes them in.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The binary looked up on `PATH` when `ctxpack.server.path` is empty. */
export const DEFAULT_SERVER = 'ctxpack-lsp';

/** The raw setting values, as read from the configuration. */
export interface ServerSettings {
  /** `ctxpack.server.path`; empty means {@link DEFAULT_SERVER} on `PATH`. */
  path: string;
  /** `ctxpack.server.extraArgs`; non-string entries are ignored. */
  extraArgs: readonly unknown[];
  /** `ctxpack.registry`; empty means no `--registry` argument. */
  registry: string;
}

export interface ServerCommand {
  /** A bare program name to look up on `PATH`, or a path to the binary. */
  command: string;
  args: string[];
}

/**
 * Builds the server's command line: `COMMAND [--registry DIR] [EXTRA_ARGS...]`.
 *
 * Paths may start with `~` (the home directory) or contain `${workspaceFolder}`; relative
 * paths with a directory part are resolved against `workspaceRoot` when there is one.
 */
export function resolveServerCommand(settings: ServerSettings, workspaceRoot: string | undefined): ServerCommand {
  const configured = settings.path.trim();
  const command = configured === '' ? DEFAULT_SERVER : resolvePath(configured, workspaceRoot, false);

  const args: string[] = [];
  const registry = settings.registry.trim();
  if (registry !== '') {
    args.push('--registry', resolvePath(registry, workspaceRoot, true));
  }
  for (const arg of settings.extraArgs) {
    if (typeof arg === 'string') {
      args.push(arg);
    }
  }
  return { command, args };
}

/**
 * Expands `~` and `${workspaceFolder}` and anchors a relative path at the workspace.
 *
 * A bare name such as `ctxpack-lsp` is left alone unless `alwaysAnchor` is set: for the
 * server it means "look it up on PATH", for the registry it is a directory name.
 */
export function resolvePath(value: string, workspaceRoot: string | undefined, alwaysAnchor: boolean): string {
  let p = value;
  if (workspaceRoot !== undefined) {
    p = p.split('${workspaceFolder}').join(workspaceRoot);
  }
  if (p === '~') {
    p = os.homedir();
  } else if (p.startsWith('~/') || p.startsWith('~\\')) {
    p = path.join(os.homedir(), p.slice(2));
  }
  const hasDirectory = p.includes('/') || (process.platform === 'win32' && p.includes('\\'));
  if (!path.isAbsolute(p) && workspaceRoot !== undefined && (alwaysAnchor || hasDirectory)) {
    p = path.resolve(workspaceRoot, p);
  }
  return p;
}

/**
 * Finds the file that spawning `command` would run, or `undefined` if there is none.
 *
 * A command with a directory part must name an existing executable file; a bare name is
 * searched on `PATH` (with `PATHEXT` on Windows). Checking up front lets the extension
 * say "not found, set ctxpack.server.path" instead of surfacing a raw `spawn ENOENT`.
 */
export function findExecutable(
  command: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  const isWindows = platform === 'win32';
  const extensions = isWindows
    ? ['', ...(env.PATHEXT ?? '.COM;.EXE;.BAT;.CMD').split(';').filter((e) => e !== '')]
    : [''];
  const hasDirectory = command.includes('/') || (isWindows && command.includes('\\'));
  const directories = hasDirectory
    ? ['']
    : (env.PATH ?? env.Path ?? '').split(isWindows ? ';' : ':').filter((d) => d !== '');

  for (const directory of directories) {
    for (const extension of extensions) {
      const candidate = directory === '' ? command + extension : path.join(directory, command + extension);
      if (isExecutableFile(candidate, isWindows)) {
        return candidate;
      }
    }
  }
  return undefined;
}

function isExecutableFile(candidate: string, isWindows: boolean): boolean {
  try {
    if (!fs.statSync(candidate).isFile()) {
      return false;
    }
    if (!isWindows) {
      fs.accessSync(candidate, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}
