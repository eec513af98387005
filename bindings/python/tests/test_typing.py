"""The package's types hold: `mypy --strict` accepts a host written against it, and
that host runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ctxpack
from conftest import CONFORMANCE

HERE = Path(__file__).parent


def test_mypy_strict_accepts_a_host() -> None:
    try:
        from mypy import api
    except ImportError:
        if os.environ.get("CTXPACK_REQUIRE_ALL_TESTS"):
            raise
        pytest.skip("mypy is not installed")
    out, err, status = api.run(["--strict", "--no-incremental", str(HERE / "host_example.py")])
    assert status == 0, out + err


def test_the_host_runs(tmp_path: Path) -> None:
    import host_example

    case = json.loads((CONFORMANCE / "basic_supervised_refund" / "case.json").read_text())
    source = (CONFORMANCE / "basic_supervised_refund" / case["pack"]).resolve()
    artifact = tmp_path / "pack.json"
    artifact.write_bytes(host_example.artifact_of(source))
    body = host_example.answer(artifact, case)
    assert body is not None and body["model"] == "gpt-4o"
    assert host_example.answer(artifact, {**case, "run": {"run_id": "r"}}) is None
    assert host_example.lint("") and host_example.tokens("hello world") == 2


def test_every_public_name_is_documented() -> None:
    for name in ctxpack.__all__:
        obj = getattr(ctxpack, name)
        if name == "__version__":
            assert isinstance(obj, str) and obj
            continue
        assert obj.__doc__ and obj.__doc__.strip(), name
    for cls in (ctxpack.Pack, ctxpack.CompiledContext):
        for attr in dir(cls):
            if not attr.startswith("_"):
                assert getattr(cls, attr).__doc__, f"{cls.__name__}.{attr}"
