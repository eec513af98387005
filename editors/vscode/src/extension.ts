/**
 * Entry point: activated when a `.ctxpack` file opens. Highlighting and editing rules come
 * from `package.json` contributions; this file only wires the language server up.
 */
import * as vscode from 'vscode';
import { CtxpackClient, SERVER_SETTINGS } from './client';

let client: CtxpackClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const ctxpack = new CtxpackClient();
  client = ctxpack;

  context.subscriptions.push(
    vscode.commands.registerCommand('ctxpack.restartServer', () => ctxpack.restart()),
    // Run from an intent's code lens: the tests beside the pack, in a terminal.
    vscode.commands.registerCommand('ctxpack.runTests', (args?: { files?: string[] }) => {
      const files = args?.files ?? [];
      const active = vscode.window.activeTextEditor?.document.uri.fsPath;
      const targets = files.length > 0 ? files : active !== undefined ? [active] : [];
      const terminal = vscode.window.createTerminal('ctxpack test');
      terminal.show();
      terminal.sendText(['ctxpack', 'test', ...targets.map(shellQuote)].join(' '));
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (SERVER_SETTINGS.some((setting) => event.affectsConfiguration(setting))) {
        void ctxpack.restart();
      }
    }),
    // In an untrusted workspace VS Code ignores the workspace's values of the server
    // settings (see `capabilities.untrustedWorkspaces`); once trusted, they apply.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void ctxpack.restart()),
  );

  // Not awaited: a slow or hanging server must not hold activation (and with it the
  // restart command) hostage.
  void ctxpack.start();
}

export async function deactivate(): Promise<void> {
  const current = client;
  client = undefined;
  await current?.dispose();
}

/** One POSIX shell word. */
function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}
