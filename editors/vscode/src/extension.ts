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
