"""One cold start, in a fresh process: `python cold.py plain|ctxpack ROOT`. Prints the
milliseconds from the first line of this script to the first assembled context (plain:
import tiktoken + get_encoding + load the workload + first assembly; ctxpack: import +
load the pinned pack, tokenizer included + read the inputs + first compile + to_json)."""

import time

T0 = time.perf_counter()
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    which, root = sys.argv[1], Path(sys.argv[2])
    if which == "plain":
        sys.path.insert(0, str(Path(__file__).parent))
        import plain_python

        counter = plain_python.Counter()
        w = plain_python.load_workload(root / "benches" / "data" / "workload.json")
        plain_python.assemble(w, counter.count)
    else:
        import ctxpack

        work = root / "benches" / "workload"
        pack = ctxpack.Pack.load(sys.argv[3])
        inputs = {k: (work / f"{k}.json").read_bytes() for k in ("run", "request", "evidence", "memory")}
        pack.compile(**inputs).to_json()
    print(f"{(time.perf_counter() - T0) * 1e3:.3f}")


main()
