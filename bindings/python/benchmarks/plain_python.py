"""The hand-rolled assembly most Python hosts write, as the baseline ctxpack is measured
against: Python + tiktoken (o200k_base), a greedy fill per bucket by priority, and a
variant with a token cache keyed by a hash of each text.

It assembles the reference workload (`benches/data/workload.json`) the way that
workload describes: fixed text first, the rest split between the buckets by share
(floor, then the leftover tokens by largest remainder), each bucket filled greedily
in its keep order, a block that does not fit skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

BUCKETS = ("policy", "tools", "evidence", "memory", "session")


def load_workload(path: Path) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def allocate(available: int, shares: Dict[str, int]) -> Dict[str, int]:
    alloc = {b: available * p // 100 for b, p in shares.items()}
    rem = sorted(shares, key=lambda b: (-(available * shares[b] % 100), b))
    left = available * sum(shares.values()) // 100 - sum(alloc.values())
    for b in rem[:left]:
        alloc[b] += 1
    return alloc


def policy_text(p: Dict[str, Any]) -> str:
    return f"[{p['id']}] {p['text']}\n"


def tool_text(t: Dict[str, Any]) -> str:
    return f"[{t['id']}] {t['name']}: {t['description']}\n"


def evidence_text(e: Dict[str, Any]) -> str:
    return f"<evidence id=\"{e['id']}\" source=\"{e['source']}\">{e['content']}</evidence>\n"


def memory_text(m: Dict[str, Any]) -> str:
    return f"<memory id=\"{m['id']}\">{m['content']}</memory>\n"


class Counter:
    """Token counting with tiktoken, plain or through a cache keyed by a hash."""

    def __init__(self) -> None:
        import tiktoken

        self.enc = tiktoken.get_encoding("o200k_base")
        self.enc.encode("warm up the regex")
        self.cache: Dict[bytes, int] = {}

    def count(self, text: str) -> int:
        return len(self.enc.encode(text))

    def count_cached(self, text: str) -> int:
        k = hashlib.blake2b(text.encode(), digest_size=16).digest()
        n = self.cache.get(k)
        if n is None:
            n = self.cache[k] = len(self.enc.encode(text))
        return n


Item = Tuple[str, str]


def fill(items: List[Item], budget: int, count: Callable[[str], int], rule: str) -> Tuple[List[str], List[str], List[str], int]:
    kept: List[str] = []
    dropped: List[str] = []
    texts: List[str] = []
    used = 0
    for i, (bid, text) in enumerate(items):
        t = count(text)
        if used + t <= budget:
            kept.append(bid)
            texts.append(text)
            used += t
        else:
            dropped.append(bid)
            if rule == "prefix":
                dropped.extend(b for b, _ in items[i + 1 :])
                break
    return kept, dropped, texts, used


def assemble(w: Dict[str, Any], count: Callable[[str], int]) -> Dict[str, Any]:
    b = w["budget"]
    fixed = count(w["system"]) + count(w["developer"]) + count(w["task"])
    alloc = allocate(b["total"] - fixed, b["shares"])
    rule = b["fill"]
    order = {
        "policy": [(p["id"], policy_text(p)) for p in sorted(w["policies"], key=lambda p: (-p["priority"], p["id"]))],
        "tools": [(t["id"], tool_text(t)) for t in sorted(w["tools"], key=lambda t: (-t["priority"], t["id"]))],
        "evidence": [(e["id"], evidence_text(e)) for e in sorted(w["evidence"], key=lambda e: (-e["score"], e["id"]))],
        "memory": [(m["id"], memory_text(m)) for m in sorted(w["memory"], key=lambda m: (-m["score"], m["id"]))],
        "session": [(h["id"], h["content"]) for h in reversed(w["history"])],
    }
    kept: Dict[str, List[str]] = {}
    dropped: Dict[str, List[str]] = {}
    texts: Dict[str, List[str]] = {}
    used = fixed
    for name in BUCKETS:
        kept[name], dropped[name], texts[name], u = fill(order[name], alloc[name], count, rule)
        used += u
    roles = {h["id"]: h["role"] for h in w["history"]}
    history = [{"role": roles[i], "content": t} for i, t in reversed(list(zip(kept["session"], texts["session"])))]
    messages = [
        {"role": "system", "content": w["system"]},
        {
            "role": "developer",
            "content": w["developer"] + "\n\n# Policies\n" + "".join(texts["policy"]) + "\n# Tools\n" + "".join(texts["tools"]),
        },
        {"role": "user", "content": "# Evidence\n" + "".join(texts["evidence"]) + "\n# Memory\n" + "".join(texts["memory"])},
        *history,
        {"role": "user", "content": w["task"]},
    ]
    return {"messages": messages, "kept": kept, "dropped": dropped, "tokens_used": used, "fixed": fixed, "alloc": alloc}
