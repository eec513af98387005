#!/usr/bin/env bash
# Installs, builds, tests and packages the VS Code extension from a fresh clone.
# Needs Node 20+ and npm; everything else comes from the npm registry.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

# A stale package would make the check below pass without packaging anything.
rm -f ./*.vsix

npm ci --no-audit --no-fund
npm run build
npm test
npm run package

shopt -s nullglob
vsix=(./*.vsix)
if [[ ${#vsix[@]} -ne 1 ]]; then
  echo "ci.sh: expected one .vsix, found ${#vsix[@]}" >&2
  exit 1
fi

# The package must hold what the extension loads at run time.
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
unzip -q "${vsix[0]}" -d "$unpacked"
listing=$(cd "$unpacked" && find . -type f | sed 's#^\./# #')
for required in \
  extension/package.json \
  extension/out/extension.js \
  extension/out/client.js \
  extension/out/serverCommand.js \
  extension/syntaxes/ctxpack.tmLanguage.json \
  extension/language-configuration.json \
  extension/node_modules/vscode-languageclient/node.js \
  extension/node_modules/vscode-languageserver-protocol/package.json \
  extension/node_modules/vscode-jsonrpc/package.json; do
  if ! grep -q " ${required}\$" <<<"$listing"; then
    echo "ci.sh: ${vsix[0]} is missing ${required}" >&2
    exit 1
  fi
done
if grep -qE ' extension/(src|test|out/test)/' <<<"$listing"; then
  echo "ci.sh: ${vsix[0]} contains sources or tests" >&2
  exit 1
fi

# Load the packaged extension under Node and let it drive a fake server over stdio.
node test/vsix-smoke.js "$unpacked/extension"

echo "ci.sh: built ${vsix[0]} ($(du -h "${vsix[0]}" | cut -f1))"
