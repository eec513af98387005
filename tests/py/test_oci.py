"""OCI interoperability with the ORAS Python SDK (`oras`, PyPI), against a real
registry on 127.0.0.1 (Debian's `docker-registry`): the SDK pulls what `ctxpack
publish` pushed, byte for byte, and ctxpack loads an artifact the SDK pushed in the
same format.

Without `docker-registry` these tests are skipped, unless CTXPACK_REQUIRE_OCI is set
(as CI sets it): then they fail."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CTXPACK = os.environ.get("CTXPACK_BIN", str(ROOT / "target" / "debug" / "ctxpack"))
PACK_MEDIA_TYPE = "application/vnd.ctxpack.pack.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def registry(tmp_path):
    binary = shutil.which("docker-registry") or (
        "/usr/bin/docker-registry" if os.path.exists("/usr/bin/docker-registry") else None
    )
    if binary is None:
        if os.environ.get("CTXPACK_REQUIRE_OCI"):
            pytest.fail("CTXPACK_REQUIRE_OCI is set and `docker-registry` is not installed")
        pytest.skip("`docker-registry` is not installed (Debian: apt-get install docker-registry)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {tmp_path / 'storage'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("the registry did not start")
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def ctxpack(cwd, *args):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CTXPACK_REGISTRY", "CTXPACK_TRUST", "CTXPACK_INSECURE_REGISTRIES")
    }
    env["CTXPACK_CACHE"] = str(cwd / "cache")
    env["DOCKER_CONFIG"] = str(cwd / "no-docker-config")
    out = subprocess.run([CTXPACK, *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"{args}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def oras_client(host):
    if os.environ.get("CTXPACK_REQUIRE_OCI"):
        import oras.client as oras_client_module
    else:
        oras_client_module = pytest.importorskip("oras.client")
    return oras_client_module.OrasClient(hostname=host, insecure=True)


def build_support(cwd):
    ctxpack(cwd, "build", str(ROOT / "packs" / "support" / "support.ctxpack"), "-o", "s.json")
    return (cwd / "s.json").read_bytes()


def compile_args(registry_url, pack):
    inputs = ROOT / "packs" / "support" / "inputs"
    return (
        "compile", "--registry", registry_url, "--pack", pack,
        "--run", str(inputs / "run.json"), "--request", str(inputs / "request.json"),
    )


def test_the_sdk_pulls_what_ctxpack_pushed(registry, tmp_path):
    built = build_support(tmp_path)
    ctxpack(tmp_path, "publish", "--registry", f"oci://{registry}/team", "s.json")
    client = oras_client(registry)
    target = f"{registry}/team/acme/support-agent:1.4.0"

    manifest = client.get_manifest(target)
    assert manifest["artifactType"] == PACK_MEDIA_TYPE
    assert manifest["config"]["mediaType"] == EMPTY_MEDIA_TYPE
    assert [layer["mediaType"] for layer in manifest["layers"]] == [PACK_MEDIA_TYPE]
    annotations = manifest["annotations"]
    assert annotations["org.opencontainers.image.title"] == "acme/support-agent"
    assert annotations["org.opencontainers.image.version"] == "1.4.0"
    assert annotations["vnd.ctxpack.pack.hash"] == json.loads(built)["hash"]

    out = tmp_path / "pulled"
    files = client.pull(target=target, outdir=str(out))
    assert len(files) == 1
    assert pathlib.Path(files[0]).read_bytes() == built


def test_ctxpack_loads_what_the_sdk_pushed(registry, tmp_path):
    built = build_support(tmp_path)
    (tmp_path / "empty.json").write_text("{}")
    client = oras_client(registry)
    target = f"{registry}/team/acme/support-agent:1.4.0"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        client.push(
            target=target,
            files=[f"s.json:{PACK_MEDIA_TYPE}"],
            manifest_config=f"empty.json:{EMPTY_MEDIA_TYPE}",
        )
    finally:
        os.chdir(cwd)

    url = f"oci://{registry}/team"
    versions = json.loads(
        ctxpack(tmp_path, "versions", "--registry", url, "acme/support-agent", "--format", "json")
    )
    assert versions["versions"] == [{"version": "1.4.0", "hash": json.loads(built)["hash"]}]
    from_registry = ctxpack(tmp_path, *compile_args(url, "acme/support-agent@1.4.0"))
    from_file = ctxpack(tmp_path, *compile_args(url, "s.json"))
    assert from_registry == from_file
    # Publishing the same artifact again finds it there.
    out = ctxpack(tmp_path, "publish", "--registry", url, "s.json")
    assert "already published" in out
