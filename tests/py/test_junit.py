"""`ctxpack test --junit` read by an independent JUnit parser (junitparser, as CI
test reporters read it): suites, cases, failures and errors as the runner counted
them."""

import os
import pathlib
import shutil
import subprocess

import junitparser
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CTXPACK = os.environ.get("CTXPACK_BIN", str(ROOT / "target" / "debug" / "ctxpack"))


@pytest.fixture()
def project(tmp_path):
    shutil.copytree(ROOT / "packs" / "support", tmp_path / "support")
    (tmp_path / "support" / "more.tests.yaml").write_text(
        "pack: support.ctxpack\n"
        "defaults:\n"
        "  run: { run_id: r, safety_mode: supervised, user: { id: u, roles: [customer] } }\n"
        "  request: { request_id: q, intent: order_status, channel: web, locale: en-US,\n"
        "             message: hi, context: { customer: { tier: pro, age: 34, verified: true,\n"
        "             lifetime_value: 1.0, country: US }, flags: [], refunds_last_90d: 0 } }\n"
        "cases:\n"
        "  - name: passes\n"
        "    expect: { must_refuse: false }\n"
        "  - name: fails <&> \"quoted\"\n"
        "    expect: { must_refuse: true }\n"
        "  - name: typo\n"
        "    expect: { tols: [] }\n"
    )
    (tmp_path / "support" / "broken.tests.yaml").write_text("pack: support.ctxpack\n")
    return tmp_path


def test_junitparser_reads_what_the_runner_counted(project):
    report = project / "reports" / "junit.xml"
    done = subprocess.run(
        [CTXPACK, "test", "--junit", str(report), "support"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 4, done.stderr  # the broken file
    xml = junitparser.JUnitXml.fromfile(str(report))
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == [
        "support/broken.tests.yaml",
        "support/more.tests.yaml",
        "support/support.tests.yaml",
    ]
    more = suites["support/more.tests.yaml"]
    assert (more.tests, more.failures, more.errors) == (3, 2, 0)
    results = {case.name: case.result for case in more}
    assert results["passes"] == []
    failure = results['fails <&> "quoted"'][0]
    assert isinstance(failure, junitparser.Failure)
    assert "must_refuse: expected true, actual false" in failure.message
    assert "reproduce: ctxpack compile" in failure.text
    assert "unknown expectation `tols`" in results["typo"][0].message
    broken = suites["support/broken.tests.yaml"]
    assert broken.errors == 1
    error = list(broken)[0].result[0]
    assert isinstance(error, junitparser.Error)
    assert "missing `cases`" in error.message
    bundled = suites["support/support.tests.yaml"]
    assert bundled.tests > 20 and bundled.failures == 0
    for case in bundled:
        assert case.classname == "support/support.tests.yaml"
        assert case.time >= 0
