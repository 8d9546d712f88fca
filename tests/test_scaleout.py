"""Scale-out on Dask: papers run on workers, their outputs come back, and DVC records them as from a serial run."""

import json
import sys

import pytest
import yaml
from conftest import BIN, read_metrics, sh, without_timings
from test_dvc import CHEAP_PAPERS, set_smoke, status

from paperflows.params import paper_slugs
from paperflows.pipeline import run_paper
from paperflows.scaleout import expected_makespan_s, run_paper_stages, tree_digest


def test_makespan_is_the_longest_first_greedy_schedule():
    durations = [3, 5, 3, 4, 3]
    assert expected_makespan_s(durations, 1) == sum(durations)
    assert expected_makespan_s(durations, 5) == expected_makespan_s(durations, 9) == max(durations)
    # 5 -> A, 4 -> B, 3 -> B (7), 3 -> A (8), 3 -> B (10): greedy, not the optimum 9 (5+4 | 3+3+3)
    assert expected_makespan_s(durations, 2) == 10


def test_a_worker_refuses_a_clone_with_other_code(repo_copy):
    repo, _ = repo_copy
    digest = tree_digest(repo)
    (repo / "results" / "SUMMARY.md").write_text("rewritten by a stage\n")
    (repo / "README.md").write_text("edited during the run\n")
    assert tree_digest(repo) == digest, "outputs landing during a run, and docs, are not part of the digest"
    (repo / "params.yaml").write_text((repo / "params.yaml").read_text() + "\n# an edit\n")
    assert tree_digest(repo) != digest, "an uncommitted change to the params is part of the digest"
    with pytest.raises(RuntimeError, match="check out the same code and params"):
        run_paper_stages(paper_slugs()[0], digest, str(repo))


def test_two_local_workers_commit_what_a_serial_run_writes(repo_copy, tmp_path_factory):
    repo, env = repo_copy
    first, second = CHEAP_PAPERS
    stages = [first, f"{first}-eval", second, f"{second}-eval"]
    set_smoke(repo / "params.yaml", [first, second])
    out = sh([str(BIN / "paperflows"), "repro", "--papers", f"{first},{second}", "--workers", "2"], repo, env)
    assert "2 papers on 2 Dask workers" in out and "2 of 2 papers" in out, out
    assert not set(stages) & set(status(repo, env)), "dvc commit recorded both papers' stages"

    serial = tmp_path_factory.mktemp("serial")   # the stages' code path, one paper after the other, in this process

    def assert_serial_run_agrees(slug):
        run_paper(slug, params_file=repo / "params.yaml", out_root=serial)
        scaled = read_metrics(repo / "results" / slug)
        assert without_timings(read_metrics(serial / "results" / slug)) == without_timings(scaled), slug
        seeds = [json.loads((root / "records" / slug / "meta.json").read_text())["seeds"] for root in (repo, serial)]
        assert seeds[0] == seeds[1]

    for slug in (first, second):
        assert_serial_run_agrees(slug)

    # one more seed: the stale paper's task carries its stored records, and the worker runs the new seed alone
    raw = yaml.safe_load((repo / "params.yaml").read_text())
    raw["papers"][first]["seeds"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    # (a copy lacks the DVC-cached data/, so `paperflows repro` would find every paper stale: the stale paper's
    # task is submitted as that command submits it)
    sh([sys.executable, "-c", "import sys; from paperflows.scaleout import repro_on_dask; "
                              f"sys.exit(len(repro_on_dask(['{first}'], {{'{first}': 1.0}}, workers=2)))"], repo, env)
    meta = json.loads((repo / "records" / first / "meta.json").read_text())
    assert meta["seeds_run"] == [meta["seeds"][-1]], "only the added seed ran on the worker"
    assert_serial_run_agrees(first)
