import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from paperflows.settings import apply_environment_defaults

apply_environment_defaults()  # before any test imports Prefect or matplotlib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the toy paper


def params_for(slug: str, smoke: bool = True, **overrides):
    """A paper's typed params: its ``params.yaml`` section (at smoke scale by default) with ``overrides``,
    validated by its model, as a method function receives them."""
    from paperflows.params import load_params_model, read_params_file

    model, smoke_values = load_params_model(slug)
    section = dict(read_params_file(ROOT / "params.yaml")["papers"][slug])
    return model.model_validate({**section, **(smoke_values if smoke else {}), **overrides})


REFERENCE_FINGERPRINT = ROOT / "results" / "FINGERPRINT.txt"


def digest_of_fingerprint_file(path: Path) -> str:
    """The digest that a machine printing the fingerprint file ``path`` records in each ``metrics.json``, whatever
    this process's kernels compute."""
    from paperflows.core.fingerprint import fingerprint_digest, parse_fingerprint

    return fingerprint_digest(parse_fingerprint(path.read_text()))


@contextlib.contextmanager
def exclusive(lock_path: Path):
    """Hold an exclusive lock on ``lock_path`` (created if missing) for the ``with`` block: of the pytest-xdist
    workers that enter it with the same path, one at a time runs the block."""
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:   # a host name: it would need the network to resolve
        return False


@pytest.fixture(scope="session", autouse=True)
def no_network():
    """Nothing a test runs in this process reaches beyond the machine: a TCP/UDP connection to any address but
    loopback (the Prefect API, Dask) raises. Every paper's smoke run (tests/test_papers.py) thereby shows that
    its data, its models (tasks/pretrained.py) and its run need no network."""
    connect = socket.socket.connect

    def loopback_only(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise OSError(f"network access in a test: {address!r} (only loopback is allowed)")
        return connect(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", loopback_only)
        yield


@pytest.fixture(scope="session", autouse=True)
def prefect_harness(no_network):
    """One temporary Prefect API for the whole session (starting one costs ~14 s)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session", autouse=True)
def one_conversion_per_model():
    """pytest-xdist workers share ``data/_pretrained``: on a clean clone the first worker to need a language
    model converts it while another that needs it waits, instead of each converting its own copy (tens of
    seconds of both cores per model). Every caller goes through ``P.load``, so the lock reaches them all."""
    from tasks import pretrained as P

    load = P.load

    def load_converting_once(name=P.DEFAULT_MODEL, cache_dir=None):
        folder = Path(cache_dir) if cache_dir is not None else P.DEFAULT_CACHE_ROOT / name
        if (folder / "paperflows_source.json").exists():
            return load(name, cache_dir)
        # the lock lives outside the folder: data/_pretrained is a DVC output, and a stray file would change it
        key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
        with exclusive(Path(tempfile.gettempdir()) / f"paperflows-convert-{key}.lock"):
            return load(name, cache_dir)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(P, "load", load_converting_once)
        yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness) -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


def without_timings(value):
    """A metrics document with every runtime removed: what the determinism checks compare.

    Claims and sanity checks on runtimes go too, and so do the verdict counts of both (the document's top-level
    ``verdicts`` and ``sanity``), which include them.
    """
    if isinstance(value, dict) and "claims" in value and isinstance(value.get("sanity"), dict):
        value = {k: v for k, v in value.items() if k != "sanity"}
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if k not in ("timings", "verdicts")
                and not (isinstance(v, dict) and str(v.get("metric", "")).startswith("timings."))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def read_metrics(results_dir: Path) -> dict:
    return json.loads((Path(results_dir) / "metrics.json").read_text())


BIN = Path(sys.executable).parent
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t"}  # commits in the tests' scratch repositories


def sh(args, cwd, env):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture()
def repo_copy(tmp_path, prefect_api_url):
    """A git repo in a temporary folder holding the working tree's tracked and untracked (not ignored) files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PREFECT_API_URL": prefect_api_url,
           **GIT_IDENTITY}
    sh(["git", "init", "-q"], tmp_path, env)
    sh(["git", "add", "-A"], tmp_path, env)
    sh(["git", "commit", "-qm", "copy"], tmp_path, env)
    return tmp_path, env
