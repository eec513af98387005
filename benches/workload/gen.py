#!/usr/bin/env python3
"""Writes the reference benchmark workload as a pack and compile inputs.

Reads ../data/workload.json (relative to this file) and writes, beside this file:

    workload.ctxpack   the pack: prompts, budget, 60 tools, 40 policies, one intent
    run.json           the RunContext
    request.json       the InvokeRequest, with the workload's history
    evidence.json      the 200 evidence items
    memory.json        the 50 memory items, promoted

The output is deterministic and the pack is already in `ctxpack fmt` layout.

    python3 gen.py           rewrite the five files
    python3 gen.py --check   exit 1 if a file on disk differs from what would be written

Python 3.9+, standard library only.
"""

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "data" / "workload.json"

NAME = "bench/workload"
VERSION = "1.0.0"
SOURCE_NOTE = "benches/data/workload.json"

# Bucket priorities of the reference workload, in declaration order. The workload
# itself gives only the shares; its fill rule ("skip") is the language's `drop`.
BUCKETS = [
    ("policy", 90),
    ("tools", 80),
    ("evidence", 50),
    ("memory", 40),
    ("session", 30),
]

IDENT = re.compile(r"[a-z_][a-z0-9_]*")

# The request and run of the reference workload.
RUN = {"run_id": "bench", "safety_mode": "autonomous"}
REQUEST = {
    "request_id": "bench-1",
    "intent": "resolve",
    "message": "Where is my refund?",
    "channel": "web",
    "locale": "en-US",
}


def quote(text, template=False):
    """A one-line `"..."` string literal whose value is exactly `text`.

    Escapes `\\` and `"`, writes newlines and tabs as `\\n` and `\\t` and other
    control characters as `\\u{X}`. In a template (`prompt`, `task`, `instruct`,
    `block`), every `{{` is written `\\{{` so that it stays literal text; pairs are
    taken left to right, as the template parser finds them.
    """
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if template and text.startswith("{{", i):
            out.append("\\{{")
            i += 2
            continue
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or ch in "\u2028\u2029":
            out.append("\\u{%X}" % ord(ch))
        else:
            out.append(ch)
        i += 1
    return '"' + "".join(out) + '"'


def ident(name, what):
    if not IDENT.fullmatch(name):
        raise SystemExit(f"gen.py: {what} `{name}` is not a ctxpack identifier")
    if what == "tool name" and len(name) > 64:
        raise SystemExit(f"gen.py: tool name `{name}` is longer than 64 characters")
    return name


def integer(n):
    """An integer literal with `_` thousands separators: 32_000."""
    return f"{int(n):_}"


def percent(share):
    """A percentage literal: 10%, 12.5% (at most four decimal places)."""
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise SystemExit(f"gen.py: share {share!r} is not a number")
    if float(share) == int(share):
        return f"{int(share)}%"
    text = f"{share:.4f}".rstrip("0").rstrip(".")
    if float(text) != float(share):
        raise SystemExit(f"gen.py: share {share!r} has more than four decimal places")
    return f"{text}%"


def policy_name(policy_id):
    return ident(policy_id.replace("-", "_"), "policy name")


def pack_text(w):
    shares = w["budget"]["shares"]
    width = max(len(name) for name, _ in BUCKETS)
    lines = [
        f"// The reference benchmark workload as a pack. Generated from {SOURCE_NOTE}",
        "// by gen.py beside this file: edit the generator, not this file.",
        f'pack "{NAME}" version "{VERSION}"',
        "",
        f"prompt system {quote(w['system'], template=True)}",
        "",
        f"prompt developer {quote(w['developer'], template=True)}",
        "",
        "budget {",
        f"  total {integer(w['budget']['total'])}",
        "  tokenizer o200k",
    ]
    for name, priority in BUCKETS:
        pad = " " * (width - len(name))
        lines.append(
            f"  bucket {name}{pad} {{ share {percent(shares[name])} "
            f"priority {priority} overflow drop }}"
        )
    lines.append("}")

    tools = w["tools"]
    for t in tools:
        lines += [
            "",
            f"tool {ident(t['name'], 'tool name')} {{",
            f"  description {quote(t['description'])}",
            "  kind read",
            "  risk low",
            "  approval auto",
            "}",
        ]

    lines += [
        "",
        "intent resolve fallback {",
        "  safety autonomous",
        "  tools " + ", ".join(t["name"] for t in tools),
        f"  task {quote(w['task'], template=True)}",
        "}",
    ]

    for p in w["policies"]:
        lines += [
            "",
            f"policy {policy_name(p['id'])} priority {int(p['priority'])} {{",
            "  when true",
            f"  instruct {quote(p['text'], template=True)}",
            "}",
        ]
    return "\n".join(lines) + "\n"


def json_text(value):
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def outputs(w):
    evidence = [
        {"id": e["id"], "source": e["source"], "content": e["content"], "score": e["score"]}
        for e in w["evidence"]
    ]
    memory = [
        {"id": m["id"], "content": m["content"], "score": m["score"], "promoted": True}
        for m in w["memory"]
    ]
    history = [{"role": h["role"], "content": h["content"]} for h in w["history"]]
    request = dict(REQUEST)
    request["history"] = history
    return {
        "workload.ctxpack": pack_text(w),
        "run.json": json_text(RUN),
        "request.json": json_text(request),
        "evidence.json": json_text(evidence),
        "memory.json": json_text(memory),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a file differs from what would be written",
    )
    args = parser.parse_args(argv)
    with open(SOURCE, encoding="utf-8") as f:
        w = json.load(f)
    files = outputs(w)
    if args.check:
        stale = []
        for name, text in files.items():
            path = HERE / name
            try:
                on_disk = path.read_bytes()
            except OSError:
                on_disk = None
            if on_disk != text.encode("utf-8"):
                stale.append(name)
        if stale:
            print(
                "out of date: " + ", ".join(stale) + " (run `python3 gen.py` to rewrite)",
                file=sys.stderr,
            )
            return 1
        return 0
    for name, text in files.items():
        with open(HERE / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
