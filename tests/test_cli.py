import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from paperflows.params import ParamsError, paper_slugs, read_params_file, validate_schedules


def cli(*args, env_extra=None, cwd=ROOT):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "paperflows", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_unknown_paper_fails_with_one_line():
    result = cli("run", "no_such_paper")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "unknown paper 'no_such_paper'" in result.stderr


def test_bad_override_names_the_key(tmp_path):
    result = cli("run", "lapsum", "--smoke", "--set", "seeds=0", "--out", str(tmp_path))
    assert result.returncode == 1 and "papers.lapsum.seeds" in result.stderr
    assert not any(tmp_path.iterdir())


def test_a_seeds_override_runs_that_many_seeds_without_the_committed_second_look(monkeypatch):
    """params.yaml's ``extra_seeds`` is the second look asked for by look 1 at the paper's own seed count: ``--set
    seeds=1`` runs one seed (it ran 1 + extra_seeds), ``--set seeds=30`` is not refused for the cap that 30 + extra
    would pass, and an explicit ``extra_seeds`` stays. Each command that takes ``--set`` passes them on so."""
    from typer.testing import CliRunner

    from paperflows import cli as cli_module, pipeline, scoring, stages
    from paperflows.params import resolve_params

    raw = read_params_file(ROOT / "params.yaml")
    slug = "placefield_td"   # seeds 10, extra_seeds 10, seed_cap 20
    assert resolve_params(slug, raw)[0].extra_seeds > 0
    assert resolve_params(slug, raw, overrides=["seeds=1"])[0].all_seeds > 1, "the old behaviour"
    with pytest.raises(ParamsError, match="seed_cap"):
        resolve_params(slug, raw, overrides=["seeds=15"])
    first_look = cli_module._first_look_at_other_seeds
    assert resolve_params(slug, raw, overrides=first_look(["seeds=1"]))[0].all_seeds == 1
    assert resolve_params(slug, raw, overrides=first_look(["seeds=15"]))[0].all_seeds == 15
    assert resolve_params(slug, raw, overrides=first_look(["seeds=1", "extra_seeds=2"]))[0].all_seeds == 3
    assert first_look(["lr=0.1"]) == ["lr=0.1"] and first_look(["common.seeds=2"]) == ["common.seeds=2"]

    passed = []

    def capture(*args, overrides=(), **kwargs):
        passed.append(list(overrides))
        raise RuntimeError("captured")

    for module, name in ((pipeline, "run_paper"), (stages, "record_paper"), (scoring, "evaluate_paper")):
        monkeypatch.setattr(module, name, capture)
    for command in ("run", "record", "evaluate"):
        result = CliRunner().invoke(cli_module.app, [command, slug, "--set", "seeds=1"])
        assert result.exit_code == 1, result.output
    assert passed == [["seeds=1", "extra_seeds=0"]] * 3

def test_params_are_validated_without_prefect_torch_or_any_method():
    """What makes a params error fast: validation imports only params.py files (no timing asserted here;
    benchmarks/bench_harness.py measures it)."""
    code = ("import sys; from paperflows.params import check_params_file; problems = check_params_file(); "
            "heavy = sorted(m for m in ('prefect', 'torch', 'sklearn', 'scipy', 'matplotlib') if m in sys.modules); "
            "methods = sorted(m for m in sys.modules if m.endswith(('.method', '.flow'))); "
            "print(problems, heavy, methods)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[] [] []"


def test_check_passes_on_the_repo_and_names_a_bad_key(tmp_path):
    assert cli("check").returncode == 0
    text = (ROOT / "params.yaml").read_text().replace("  lapsum:\n", "  lapsum:\n    tau_typo: 1.0\n", 1)
    (tmp_path / "params.yaml").write_text(text)
    result = cli("check", "--params-file", str(tmp_path / "params.yaml"))
    assert result.returncode == 1 and "papers.lapsum.tau_typo: Extra inputs are not permitted" in result.stderr


def test_list_shows_every_paper():
    result = cli("list")
    assert result.returncode == 0
    for slug in paper_slugs():
        assert slug in result.stdout


def test_serve_builds_one_recheck_deployment_per_paper_with_its_schedule():
    from paperflows.deployments import build_deployments

    deployments = build_deployments(ROOT / "params.yaml")
    assert sorted(d.name for d in deployments) == sorted(f"{s}-recheck" for s in paper_slugs())
    schedules = validate_schedules(read_params_file(ROOT / "params.yaml"))
    for deployment in deployments:
        slug = deployment.name.removesuffix("-recheck")
        assert deployment.parameters == {"slug": slug}  # params are read when the run starts, not now
        crons = [s.schedule.cron for s in deployment.schedules or []]
        assert crons == ([schedules[slug]] if slug in schedules else [])


def test_schedules_are_validated():
    raw = {"papers": {"lapsum": {}}}
    assert validate_schedules({**raw, "schedules": {"lapsum": "0 3 * * 1"}}) == {"lapsum": "0 3 * * 1"}
    with pytest.raises(ParamsError, match="schedules.lapsum"):
        validate_schedules({**raw, "schedules": {"lapsum": "weekly"}})
    with pytest.raises(ParamsError, match="schedules.nope"):
        validate_schedules({**raw, "schedules": {"nope": "0 3 * * 1"}})


def test_dvc_yaml_check_fails_on_a_hand_edit(tmp_path):
    assert cli("dvc-yaml", "--check").returncode == 0
    # the command compares the working directory's dvc.yaml; a copy with one dep removed must fail
    for name in ("params.yaml", "dvc.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    edited = (tmp_path / "dvc.yaml").read_text().replace("    - paperflows/core/stats.py\n", "", 1)
    (tmp_path / "dvc.yaml").write_text(edited)
    env = {"PYTHONPATH": str(ROOT)}
    result = cli("dvc-yaml", "--check", env_extra=env, cwd=tmp_path)
    assert result.returncode == 1 and "differs" in result.stderr


def test_new_paper_runs_checks_and_tests_out_of_the_box(repo_copy):
    repo, env = repo_copy
    result = cli("new", "demo_paper", env_extra=env, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "demo_paper:" in (repo / "dvc.yaml").read_text() and "demo_paper-eval:" in (repo / "dvc.yaml").read_text()
    assert "demo_paper:" in (repo / "params" / "demo_paper.yaml").read_text()
    assert cli("check", env_extra=env, cwd=repo).returncode == 0
    assert cli("dvc-yaml", "--check", env_extra=env, cwd=repo).returncode == 0
    run = cli("run", "demo_paper", "--smoke", env_extra=env, cwd=repo)
    assert run.returncode == 0, run.stderr
    assert (repo / ".paperflows/smoke/results/demo_paper/report.md").is_file()
    claims = json.loads((repo / ".paperflows/smoke/results/demo_paper/metrics.json").read_text())["claims"]
    assert claims["method_beats_baseline"]["control"]["name"] and claims["baseline_is_centred"]["role"] == "sanity"
    assert (repo / ".paperflows/smoke/records/demo_paper/means.parquet").is_file()
    rescored = cli("evaluate", "demo_paper", "--smoke", env_extra=env, cwd=repo)  # no training: records only
    assert rescored.returncode == 0 and "claims" in rescored.stdout, rescored.stderr
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "tests/test_demo_paper.py"], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert tests.returncode == 0, tests.stdout[-2000:]
    again = cli("new", "demo_paper", env_extra=env, cwd=repo)
    assert again.returncode == 1 and "already there" in again.stderr
    reserved = cli("new", "params", env_extra=env, cwd=repo)
    assert reserved.returncode == 1 and "stage's name" in reserved.stderr


def test_a_duplicate_key_in_params_yaml_is_rejected_naming_it(tmp_path):
    """DVC's parser rejects a repeated key; `check` must too, instead of keeping the last value silently."""
    text = (ROOT / "params.yaml").read_text()
    first = text.index("    seeds:")
    duplicated = text[:first] + "    seeds: 99\n" + text[first:]
    (tmp_path / "params.yaml").write_text(duplicated)
    with pytest.raises(ParamsError, match="duplicate key 'seeds'"):
        read_params_file(tmp_path / "params.yaml")
    out = cli("check", "--params-file", str(tmp_path / "params.yaml"))
    assert out.returncode == 1 and "duplicate key 'seeds'" in out.stderr


def test_repro_says_how_many_papers_and_how_long_before_it_starts():
    from paperflows.repro import choose, expected_seconds

    slugs = paper_slugs()
    assert choose(["lapsum", "tabsds"], slugs) == sorted(["lapsum", "tabsds"], key=slugs.index)
    with pytest.raises(ParamsError, match="nope"):
        choose(["nope"], slugs)
    one = expected_seconds(["lapsum"])
    assert one > 15 and expected_seconds(["lapsum", "tabsds"]) > one


def test_repro_warns_where_the_kernels_compute_other_bits_than_the_committed_results(tmp_path):
    from paperflows.core.fingerprint import fingerprint_text
    from paperflows.repro import kernels_warning

    here = tmp_path / "here.txt"
    here.write_text(fingerprint_text())
    assert kernels_warning(here) is None
    assert kernels_warning(tmp_path / "absent.txt") is None
    lines = fingerprint_text().splitlines()
    name = next(line.split()[0] for line in lines if line.startswith("torch.gelu"))
    other = tmp_path / "other.txt"
    other.write_text("\n".join(line.replace(line.split()[-1], "0000000000") if line.startswith(name) else line
                               for line in lines) + "\n")
    warning = kernels_warning(other)
    assert warning is not None and name in warning and "retrains all its seeds" in warning
    assert warning.count("torch.") == 1
