"""Shared fixtures: the repository, the `ctxpack` command line (for byte-for-byte
comparisons) and the bundled example packs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONFORMANCE = ROOT / "tests" / "conformance"
PACKS = ROOT / "packs"
WORKLOAD = ROOT / "benches" / "workload"


def cli_path() -> Path:
    """The `ctxpack` binary: `$CTXPACK_BIN`, else the debug build, else `PATH`."""
    env = os.environ.get("CTXPACK_BIN")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    for profile in ("debug", "release"):
        candidate = target / profile / "ctxpack"
        if candidate.is_file():
            return candidate
    found = shutil.which("ctxpack")
    if found:
        return Path(found)
    raise RuntimeError("no ctxpack binary: run `cargo build` or set CTXPACK_BIN")


@pytest.fixture(scope="session")
def cli() -> Path:
    return cli_path()


def run_cli(cli: Path, *args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CTXPACK_REGISTRY", "CTXPACK_TRUST")}
    return subprocess.run(
        [str(cli), *map(str, args)], capture_output=True, cwd=cwd, env=env, check=False
    )


@pytest.fixture(autouse=True)
def no_ambient_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a registry or trust policy from the environment."""
    monkeypatch.delenv("CTXPACK_REGISTRY", raising=False)
    monkeypatch.delenv("CTXPACK_TRUST", raising=False)
