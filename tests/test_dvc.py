"""DVC in a temporary copy of the repo: repro at smoke scale, a clean status, and a params change
that reruns only its own paper."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from tasks.pipeline import load_flow, paper_slugs

BIN = Path(sys.executable).parent


def sh(args, cwd, env):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture()
def repo_copy(tmp_path, prefect_api_url):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PREFECT_API_URL": prefect_api_url,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    sh(["git", "init", "-q"], tmp_path, env)
    sh(["git", "add", "-A"], tmp_path, env)
    sh(["git", "commit", "-qm", "copy"], tmp_path, env)
    return tmp_path, env


def set_smoke(params_file: Path, slugs):
    raw = yaml.safe_load(params_file.read_text())
    for slug in slugs:
        raw["papers"][slug].update(load_flow(slug).smoke)
    params_file.write_text(yaml.safe_dump(raw, sort_keys=False))
    return raw


def changed_stages(repo, env):
    return set(json.loads(sh([str(BIN / "dvc"), "status", "--json"], repo, env) or "{}"))


def test_repro_status_and_a_params_change_rerun_only_that_paper(repo_copy):
    repo, env = repo_copy
    first, second = paper_slugs()[:2]
    committed = (ROOT / "results" / first / "metrics.json").read_bytes()
    raw = set_smoke(repo / "params.yaml", [first, second])
    sh([str(BIN / "dvc"), "repro", f"paper@{first}", f"paper@{second}"], repo, env)
    assert not {f"paper@{first}", f"paper@{second}"} & changed_stages(repo, env)
    written = json.loads((repo / "results" / first / "metrics.json").read_text())
    assert written["params"] == raw["papers"][first] and written["smoke"] is False  # no --smoke: params decide
    assert (ROOT / "results" / first / "metrics.json").read_bytes() == committed, "the copy's stage wrote outside the copy"

    raw["papers"][first]["seeds"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    changed = changed_stages(repo, env)
    assert f"paper@{first}" in changed and f"paper@{second}" not in changed
    out = sh([str(BIN / "dvc"), "repro", f"paper@{first}", f"paper@{second}"], repo, env)
    assert f"Stage 'paper@{second}' didn't change" in out
