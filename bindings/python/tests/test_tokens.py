"""The compiler's token counts are tiktoken's, on the workload's texts and on texts
chosen to break tokenizers: special-token text, long runs of one character, CJK,
emoji, combining marks, whitespace runs."""

from __future__ import annotations

import json
import os
from typing import List

import pytest

import ctxpack
from conftest import ROOT


def texts() -> List[str]:
    w = json.loads((ROOT / "benches" / "data" / "workload.json").read_text())
    out = [w["system"], w["developer"], w["task"]]
    for key in ("policies", "tools", "evidence", "memory", "history"):
        for item in w[key]:
            out += [v for v in item.values() if isinstance(v, str)]
    out += [
        "<|endoftext|>", "<|endoftext|> and <|fim_prefix|><|im_start|>", "a" * 10_000, " " * 5_000,
        "\n" * 3_000, "^" * 20_000, "1234567890" * 500, "日本語のテキストと中文文本" * 200,
        "😀👍🏽👩‍👩‍👧‍👦🇫🇷" * 300, "e\u0301" * 500, "Ünïcödé   \t\t  mixed\r\n\r\n  ws", "",
        "don't WON'T it's They'RE", "x" + "\u200b" * 100, "   leading and trailing   ",
        "tabs\t\t\tand\u00a0nbsp", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "a\u0000b", "🏳️‍🌈" * 50,
    ]
    return out


def encoder():  # type: ignore[no-untyped-def]
    try:
        import tiktoken
    except ImportError:
        if os.environ.get("CTXPACK_REQUIRE_ALL_TESTS"):
            raise
        pytest.skip("tiktoken is not installed")
    return tiktoken.get_encoding("o200k_base")


def test_counts_match_tiktoken() -> None:
    enc = encoder()
    mismatches = [
        (t[:40], ctxpack.count_tokens(t), len(enc.encode_ordinary(t)))
        for t in texts()
        if ctxpack.count_tokens(t) != len(enc.encode_ordinary(t))
    ]
    assert mismatches == []


def test_unknown_tokenizer_is_invalid_input() -> None:
    with pytest.raises(ctxpack.InvalidInput):
        ctxpack.count_tokens("x", "gpt2")
    assert ctxpack.count_tokens("abcdefgh", "approx") == 2
