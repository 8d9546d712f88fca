"""Scale-out on Dask: papers run on workers, their outputs come back, and DVC records them as from a serial run."""

import json

import pytest
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
    for slug in (first, second):
        run_paper(slug, params_file=repo / "params.yaml", out_root=serial)
        scaled = read_metrics(repo / "results" / slug)
        assert without_timings(read_metrics(serial / "results" / slug)) == without_timings(scaled), slug
        seeds = [json.loads((root / "records" / slug / "meta.json").read_text())["seeds"] for root in (repo, serial)]
        assert seeds[0] == seeds[1]
