"""Every runtime conformance case, compiled through Python, gives exactly what the
command line gives: the same envelope bytes, the same provider body, or an exception
of the class matching the exit code with the same `--json-errors` object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Type

import pytest

import ctxpack
from conftest import CONFORMANCE, run_cli

CASES = sorted(p.parent for p in CONFORMANCE.glob("*/case.json"))
BY_EXIT: Dict[int, Type[ctxpack.Error]] = {
    1: ctxpack.CheckFailed,
    3: ctxpack.Unreadable,
    4: ctxpack.InvalidInput,
    5: ctxpack.Refused,
}


def test_the_suite_is_there() -> None:
    assert len(CASES) >= 40


def load(case_dir: Path) -> Dict[str, Any]:
    case: Dict[str, Any] = json.loads((case_dir / "case.json").read_text())
    return case


def compile_py(pack: ctxpack.Pack, case: Dict[str, Any], as_json: bool) -> Any:
    def doc(key: str) -> Any:
        if key not in case:
            return None
        return json.dumps(case[key]).encode() if as_json else case[key]

    cc = pack.compile(run=doc("run"), request=doc("request"), evidence=doc("evidence"), memory=doc("memory"))
    target = case.get("target")
    if target == "openai":
        return cc.openai()
    if target == "anthropic":
        return cc.anthropic()
    return cc.to_json()


def cli_compile(cli: Path, artifact: Path, case: Dict[str, Any], tmp: Path) -> Any:
    args: list[object] = ["compile", "--json-errors", "--pack", artifact]
    for key in ("run", "request", "evidence", "memory"):
        if key in case:
            path = tmp / f"{key}.json"
            path.write_text(json.dumps(case[key]))
            args += [f"--{key}", path]
    if case.get("target"):
        args += ["--target", case["target"]]
    return run_cli(cli, *args)


@pytest.mark.parametrize("case_dir", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("as_json", [False, True], ids=["objects", "json-bytes"])
def test_case(case_dir: Path, as_json: bool, cli: Path, tmp_path: Path) -> None:
    case = load(case_dir)
    expected = json.loads((case_dir / "expected.json").read_text())
    source = (case_dir / case["pack"]).resolve()
    artifact_bytes = ctxpack.build(source)
    artifact = tmp_path / "pack.json"
    built = run_cli(cli, "build", source, "-o", artifact)
    assert built.returncode == 0, built.stderr
    assert artifact.read_bytes() == artifact_bytes, "ctxpack.build differs from `ctxpack build`"
    pack = ctxpack.Pack.from_bytes(artifact_bytes)
    out = cli_compile(cli, artifact, case, tmp_path)
    assert out.returncode == expected["exit_code"]
    if expected["exit_code"] == 0:
        result = compile_py(pack, case, as_json)
        if isinstance(result, bytes):
            assert result == out.stdout
        else:
            assert result == json.loads(out.stdout)
        assert (json.loads(result) if isinstance(result, bytes) else result) == expected["output"]
    else:
        with pytest.raises(ctxpack.Error) as info:
            compile_py(pack, case, as_json)
        err = info.value
        assert type(err) is BY_EXIT[expected["exit_code"]]
        assert err.exit_code == expected["exit_code"]
        assert err.details == expected["error"] == json.loads(out.stderr)
        assert err.kind == expected["error"]["error"]["kind"]
