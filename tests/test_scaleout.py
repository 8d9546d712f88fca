"""Scale-out on Dask: papers run on workers, their outputs come back, and DVC records them as from a serial run."""

import json
import shutil

import pytest
from conftest import BIN, read_metrics, sh, without_timings
from test_dvc import CHEAP_PAPERS, set_smoke, status

from paperflows.params import paper_slugs
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


def test_two_local_workers_commit_what_a_serial_run_writes(repo_copy):
    repo, env = repo_copy
    first, second = CHEAP_PAPERS
    stages = [first, f"{first}-eval", second, f"{second}-eval"]
    set_smoke(repo / "params.yaml", [first, second])
    out = sh([str(BIN / "paperflows"), "repro", "--papers", f"{first},{second}", "--workers", "2"], repo, env)
    assert "2 papers on 2 Dask workers" in out and "2 of 2 papers" in out, out
    assert not set(stages) & set(status(repo, env)), "dvc commit recorded both papers' stages"
    scaled = {slug: read_metrics(repo / "results" / slug) for slug in (first, second)}
    records = {slug: json.loads((repo / "records" / slug / "meta.json").read_text())["seeds"] for slug in (first, second)}

    for slug in (first, second):
        shutil.rmtree(repo / "results" / slug)
    sh([str(BIN / "dvc"), "repro", "--force", "--single-item", *stages], repo, {**env, "PAPERFLOWS_FRESH_RECORDS": "1"})
    for slug in (first, second):
        serial = read_metrics(repo / "results" / slug)
        assert without_timings(serial) == without_timings(scaled[slug]), slug
        assert json.loads((repo / "records" / slug / "meta.json").read_text())["seeds"] == records[slug]
