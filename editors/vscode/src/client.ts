/**
 * Owns the language client: launching `ctxpack-lsp` over stdio, restarting it and
 * reporting launch failures in words a user can act on.
 */
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  ErrorHandler,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from 'vscode-languageclient/node';
import { DEFAULT_SERVER, findExecutable, resolveServerCommand } from './serverCommand';

/** Changing any of these restarts the server; `ctxpack.trace.server` applies live. */
export const SERVER_SETTINGS: readonly string[] = [
  'ctxpack.server.path',
  'ctxpack.server.extraArgs',
  'ctxpack.registry',
  'ctxpack.inlayHints.enabled',
  'ctxpack.codeLens.enabled',
];

const CLIENT_ID = 'ctxpack';
const CLIENT_NAME = 'ctxpack Language Server';

export class CtxpackClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  /** Start, stop and restart run one after another, never interleaved. */
  private queue: Promise<void> = Promise.resolve();
  private readonly outputChannel: vscode.OutputChannel;

  constructor() {
    // One channel for the whole session, so restarts do not pile up output channels.
    this.outputChannel = vscode.window.createOutputChannel(CLIENT_NAME);
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  async dispose(): Promise<void> {
    await this.stop();
    this.outputChannel.dispose();
  }

  private enqueue(operation: () => Promise<void>): Promise<void> {
    const result = this.queue.then(operation);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async doStart(): Promise<void> {
    const config = vscode.workspace.getConfiguration('ctxpack');
    // Only a folder on disk can anchor relative paths or be the server's working directory.
    const workspaceRoot = vscode.workspace.workspaceFolders?.find((folder) => folder.uri.scheme === 'file')?.uri.fsPath;
    const configuredPath = config.get<string>('server.path', '');
    const { command, args } = resolveServerCommand(
      {
        path: configuredPath,
        extraArgs: config.get<unknown[]>('server.extraArgs', []),
        registry: config.get<string>('registry', ''),
      },
      workspaceRoot,
    );

    const executable = findExecutable(command);
    if (executable === undefined) {
      const where =
        configuredPath.trim() === ''
          ? `\`${DEFAULT_SERVER}\` was not found on PATH. Install it (\`cargo install --path lsp\` in the ctxpack repository) or set \`ctxpack.server.path\`.`
          : `\`${command}\` (from \`ctxpack.server.path\`) does not exist or is not executable.`;
      this.log(`Not starting: ${where}`);
      void this.showStartError(`Could not start the ctxpack language server: ${where}`);
      return;
    }

    const serverOptions: ServerOptions = {
      // No `transport` on purpose: with one set, vscode-languageclient appends `--stdio`,
      // which `ctxpack-lsp` does not take. Without one it talks over stdio anyway.
      command: executable,
      args,
      // A working directory that does not exist makes spawn fail with a misleading ENOENT.
      options: { cwd: workspaceRoot !== undefined && isDirectory(workspaceRoot) ? workspaceRoot : undefined },
    };
    // Once the server runs, crashes are handled as usual (restart up to 4 times in 3 minutes).
    // Before that, a server that dies or breaks the connection is not restarted and the
    // client stays quiet: restarting a binary that cannot initialize only repeats the
    // failure, each time with a notification. The catch below reports it once.
    let running = false;
    let startupFailure: string | undefined;
    let whenRunning: ErrorHandler | undefined;
    const errorHandler: ErrorHandler = {
      error: (error, message, count) => {
        if (running && whenRunning !== undefined) {
          return whenRunning.error(error, message, count);
        }
        startupFailure ??= error.message;
        return { action: ErrorAction.Shutdown, handled: true };
      },
      closed: () => {
        if (running && whenRunning !== undefined) {
          return whenRunning.closed();
        }
        startupFailure ??= 'the server exited during startup';
        return { action: CloseAction.DoNotRestart, handled: true };
      },
    };
    const settings = vscode.workspace.getConfiguration('ctxpack');
    const clientOptions: LanguageClientOptions = {
      // Packs, and their test files (diagnostics as they are typed).
      documentSelector: [{ language: 'ctxpack' }, { language: 'yaml', pattern: '**/*.tests.yaml' }],
      // Read by the server at `initialize`: each feature can be turned off.
      initializationOptions: {
        inlayHints: { enabled: settings.get<boolean>('inlayHints.enabled', true) },
        codeLens: { enabled: settings.get<boolean>('codeLens.enabled', true) },
      },
      outputChannel: this.outputChannel,
      errorHandler,
      initializationFailedHandler: () => false,
    };

    this.log(`Starting ${[executable, ...args].map(quoteIfNeeded).join(' ')}`);
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    whenRunning = client.createDefaultErrorHandler();
    try {
      await client.start();
      // When the server exits while `initialize` is pending, `start()` can resolve even
      // though the client never got to run.
      if (!client.isRunning()) {
        throw new Error(startupFailure ?? 'the server stopped during startup');
      }
      running = true;
      this.client = client;
    } catch (error) {
      // The client has already logged the failure and shut the process down; a client that
      // never ran cannot be stopped, so it is simply dropped.
      const reason = error instanceof Error ? error.message : String(error);
      this.log(`Failed to start ${executable}: ${reason}`);
      void this.showStartError(
        `Could not start the ctxpack language server \`${executable}\` (${reason}). See the "${CLIENT_NAME}" output for details.`,
      );
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    try {
      await client.dispose();
    } catch (error) {
      // The server may already have exited (crashed, or was killed); nothing left to stop.
      this.log(`Stopping the server: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private async showStartError(message: string): Promise<void> {
    const openSettings = 'Open Settings';
    const showOutput = 'Show Output';
    const choice = await vscode.window.showErrorMessage(message, openSettings, showOutput);
    if (choice === openSettings) {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'ctxpack.server');
    } else if (choice === showOutput) {
      this.outputChannel.show(true);
    }
  }

  private log(line: string): void {
    this.outputChannel.appendLine(`[${new Date().toISOString()}] ${line}`);
  }
}

function isDirectory(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isDirectory();
  } catch {
    return false;
  }
}

function quoteIfNeeded(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : JSON.stringify(arg);
}
