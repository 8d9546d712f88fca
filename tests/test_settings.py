"""Pinned numeric kernels (issue #20): importing paperflows sets them before NumPy loads, the fingerprint under
them equals the committed reference, and one variable unpins."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REFERENCE_FINGERPRINT, ROOT, digest_of_fingerprint_file

from paperflows.settings import PINNED, UNPIN_VARIABLE



def python(code: str, **env_changes: str | None) -> str:
    """Run ``code`` in a fresh interpreter whose environment has none of the pinned variables, plus ``env_changes``."""
    env = {k: v for k, v in os.environ.items() if k not in PINNED and k != UNPIN_VARIABLE}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_importing_paperflows_pins_the_kernels_before_numpy_loads():
    code = ("import sys, os, json; import paperflows; loaded = 'numpy' in sys.modules; import numpy, torch; "
            "from threadpoolctl import threadpool_info; "
            "print(json.dumps({'loaded_before': loaded, 'env': {k: os.environ.get(k) for k in %r}, "
            "'torch': torch.backends.cpu.get_cpu_capability(), "
            "'openblas': [i.get('architecture') for i in threadpool_info() if i['internal_api'] == 'openblas']}))"
            % list(PINNED))
    seen = json.loads(python(code))
    assert seen["loaded_before"] is False  # the package pins before anything numeric is imported
    assert seen["env"] == PINNED
    assert seen["torch"] == "AVX2"
    assert seen["openblas"] and all(arch == "Haswell" for arch in seen["openblas"])


def test_one_variable_unpins_and_a_late_import_warns():
    code = "import os, paperflows; print(os.environ.get('ATEN_CPU_CAPABILITY'))"
    assert python(code, **{UNPIN_VARIABLE: "1"}).strip() == "None"
    late = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", "import numpy, paperflows"], cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k not in PINNED and k != UNPIN_VARIABLE},
                          capture_output=True, text=True, timeout=300)
    assert late.returncode != 0 and "imported first" in late.stderr


@pytest.mark.skipif(not os.uname().machine == "x86_64", reason="the reference fingerprint is of x86-64 kernels")
def test_the_pinned_fingerprint_equals_the_committed_reference():
    """Every numeric primitive computes the committed bits under the pinned kernels. The reference is of an AMD EPYC
    Zen 3 (AVX2, no AVX-512); before NumPy's X86_V4 loops and oneDNN were pinned, two AVX-512 machines (Zen 4 and
    Zen 5) agreed with each other and differed from it in four lines (float64 exp/log1p, GELU, the two training
    loops): on those, this test is the check that the two new pins close the gap."""
    out = subprocess.run([sys.executable, "-m", "paperflows", "fingerprint", "--check", str(REFERENCE_FINGERPRINT)],
                         cwd=ROOT, env={k: v for k, v in os.environ.items() if k not in PINNED}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "same bits" in out.stdout


def test_the_pins_reach_numpys_dispatch_and_onednn():
    """Where a CPU has AVX-512, NumPy would run float64 log1p on its X86_V4 loop and oneDNN its AVX-512 kernels."""
    code = ("import json, paperflows, torch; from numpy.lib.introspect import opt_func_info; "
            "torch.nn.functional.gelu(torch.ones(64, 64)); "
            "print(json.dumps(opt_func_info(func_name='^log1p$', signature='float64')['log1p']['dd']['current']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**{k: v for k, v in os.environ.items() if k not in PINNED}, "ONEDNN_VERBOSE": "1"})
    assert out.returncode == 0, out.stderr
    isa = [line for line in out.stdout.splitlines() if ",info,cpu,isa:" in line]
    assert isa and isa[0].rsplit("isa:", 1)[1].strip() == "Intel AVX2", isa
    assert json.loads(out.stdout.splitlines()[-1]) != "X86_V4"


def test_every_committed_result_carries_the_reference_digest():
    """Every paper ran under the kernels of the committed reference fingerprint: another digest means a result made
    under kernels nobody recorded, which a machine matching the reference would not reproduce bit for bit."""
    reference = digest_of_fingerprint_file(REFERENCE_FINGERPRINT)
    for path in sorted((ROOT / "results").glob("*/metrics.json")):
        assert json.loads(path.read_text())["fingerprint"] == reference, f"{path.parent.name} ran under other kernels"


def test_the_environment_is_the_one_constraints_txt_pins():
    """`make setup` installs every distribution at the version that constraints.txt names, and every dependency the
    project declares is named there: pyproject's open ranges would otherwise take whatever is newest on the day,
    and a numeric library's new release can move the committed bits."""
    import re
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement

    def normalised(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line := line.split("#")[0].strip():
            name, _, pinned_version = line.partition("==")
            pinned[normalised(name)] = pinned_version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *(r for group in project["optional-dependencies"].values() for r in group),
                *(line for line in (ROOT / "requirements-nodeps.txt").read_text().splitlines()
                  if line.strip() and not line.startswith("#"))]
    unpinned = {normalised(Requirement(r).name) for r in declared} - set(pinned)
    assert not unpinned, f"declared but not in constraints.txt: {sorted(unpinned)}"

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    other = {name: (want, installed(name)) for name, want in pinned.items() if installed(name) != want}
    assert not other, f"(constraints.txt, installed) differ: {other}"
