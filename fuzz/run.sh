#!/usr/bin/env bash
# Runs the fuzz targets, one at a time with one job, each for SECONDS.
#   fuzz/run.sh 600               # every target, 10 minutes each
#   fuzz/run.sh 60 compile check  # some targets
# Needs nightly and cargo-fuzz (`cargo install cargo-fuzz --locked`). Corpora are seeded
# from the repository's packs, fixtures and conformance cases; crashes land in
# fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(check fmt verify compile lsp_edits)
repo=..

seed() {
  local target=$1 dir=corpus/$1
  mkdir -p "$dir"
  case $target in
    check|fmt|lsp_edits)
      find "$repo/packs" "$repo/tests/fixtures" "$repo/tests/conformance/packs" "$repo/tests/data" \
        -name '*.ctxpack' -exec cp {} "$dir/" \; ;;
    verify)
      for pack in $(find "$repo/packs" "$repo/tests/conformance/packs" -name '*.ctxpack'); do
        (cd "$repo" && cargo run -q -- build "$pack" -o "fuzz/$dir/$(basename "$pack" .ctxpack).json" >/dev/null 2>&1) || true
      done ;;
    compile)
      for case in "$repo"/tests/conformance/*/case.json; do
        python3 - "$case" "$dir/$(basename "$(dirname "$case")")" <<'PY'
import json, sys
case = json.load(open(sys.argv[1]))
parts = [json.dumps(case.get(k, None)).encode() for k in ("run", "request", "evidence", "memory")]
open(sys.argv[2], "wb").write(b"\0".join(parts))
PY
      done ;;
  esac
}

for target in "${targets[@]}"; do
  seed "$target"
  log=$(mktemp)
  set +e
  cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ $status -eq 0 ]; then
    echo "$target: ${runs:-?} executions in ${seconds}s, no crash"
  else
    echo "$target: FOUND A CRASH after ${runs:-?} executions (exit $status); see fuzz/artifacts/$target/ and $log"
  fi
done
