"""A host as it would be written against ctxpack: checked with `mypy --strict` by
test_typing.py, and run by it too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional


import ctxpack


def answer(artifact: Path, inputs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    pack = ctxpack.Pack.load(artifact)
    try:
        cc: ctxpack.CompiledContext = pack.compile(
            run=inputs["run"],
            request=json.dumps(inputs["request"]).encode(),
            evidence=inputs.get("evidence"),
            memory=None,
        )
    except ctxpack.InvalidInput as e:
        where: Optional[str] = e.path
        print(f"bad input at {where}: {e.details['error']['message']}")
        return None
    except ctxpack.Refused as e:
        reason: Optional[str] = e.reason
        print(f"failed closed: {reason}")
        return None
    except ctxpack.Error as e:
        code: int = e.exit_code
        print(f"{e.kind} ({code})")
        return None
    if cc.must_refuse:
        return None
    ledger: str = cc.ledger_hash
    envelope: bytes = cc.to_json()
    assert ledger in envelope.decode()
    body: Dict[str, Any] = cc.openai(model="gpt-4o")
    return body


def lint(source: str) -> List[str]:
    diagnostics: List[ctxpack.Diagnostic] = ctxpack.check(source, path="pack.ctxpack")
    return [f"{d.file}:{d.line}:{d.column}: {d.code} {d.message}" for d in diagnostics]


def tokens(text: str) -> int:
    return ctxpack.count_tokens(text, "o200k")


def artifact_of(source: Path) -> bytes:
    data: bytes = ctxpack.build(source, locked=False)
    hits, misses = ctxpack.Pack.from_bytes(data).cache_stats
    return data if hits + misses >= 0 else b""
