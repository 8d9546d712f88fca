import os
import subprocess
import sys

from conftest import ROOT


def cli(*args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "paperflows", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=300)


def test_unknown_paper_fails_with_one_line():
    result = cli("run", "no_such_paper")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "unknown paper 'no_such_paper'" in result.stderr


def test_bad_override_names_the_key(tmp_path):
    result = cli("run", "lapsum", "--smoke", "--set", "seeds=0", "--out", str(tmp_path))
    assert result.returncode == 1 and "papers.lapsum.seeds" in result.stderr
    assert not any(tmp_path.iterdir())


def test_list_shows_every_paper():
    from tasks.pipeline import paper_slugs

    result = cli("list")
    assert result.returncode == 0
    for slug in paper_slugs():
        assert slug in result.stdout


def test_serve_builds_one_deployment_per_paper_with_its_schedule():
    from paperflows.deployments import build_deployments
    from tasks.pipeline import paper_slugs, read_params_file, validate_schedules

    deployments = build_deployments(ROOT / "params.yaml")
    assert sorted(d.name for d in deployments) == sorted(f"{s}-scheduled" for s in paper_slugs())
    schedules = validate_schedules(read_params_file(ROOT / "params.yaml"))
    for deployment in deployments:
        slug = deployment.name.removesuffix("-scheduled")
        crons = [s.schedule.cron for s in deployment.schedules or []]
        assert crons == ([schedules[slug]] if slug in schedules else [])


def test_schedules_are_validated():
    import pytest

    from tasks.pipeline import ParamsError, validate_schedules

    raw = {"papers": {"lapsum": {}}}
    assert validate_schedules({**raw, "schedules": {"lapsum": "0 3 * * 1"}}) == {"lapsum": "0 3 * * 1"}
    with pytest.raises(ParamsError, match="schedules.lapsum"):
        validate_schedules({**raw, "schedules": {"lapsum": "weekly"}})
    with pytest.raises(ParamsError, match="schedules.nope"):
        validate_schedules({**raw, "schedules": {"nope": "0 3 * * 1"}})
