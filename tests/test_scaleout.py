"""Scale-out on Dask: papers run on workers, their outputs come back, and DVC records them as from a serial run."""

import json
import sys

import pytest
import yaml
from conftest import BIN, read_metrics, sh, without_timings
from test_dvc import CHEAP_PAPERS, set_smoke, status

from paperflows.params import paper_slugs
from paperflows.pipeline import run_paper
from paperflows import scaleout
from paperflows.scaleout import expected_makespan_s, inputs_digests, paper_process_environment, run_paper_stages
from paperflows.stages import FRESH_ENV


def test_makespan_is_the_longest_first_greedy_schedule():
    durations = [3, 5, 3, 4, 3]
    assert expected_makespan_s(durations, 1) == sum(durations)
    assert expected_makespan_s(durations, 5) == expected_makespan_s(durations, 9) == max(durations)
    # 5 -> A, 4 -> B, 3 -> B (7), 3 -> A (8), 3 -> B (10): greedy, not the optimum 9 (5+4 | 3+3+3)
    assert expected_makespan_s(durations, 2) == 10


def test_papers_on_a_dask_worker_run_without_the_nannys_malloc_trim_threshold(monkeypatch):
    """A nanny exports MALLOC_TRIM_THRESHOLD_ to its worker, which would turn off glibc's dynamic mmap threshold in
    the paper's process (every array over 128 KB mapped and page-faulted anew); the rest of the environment stays."""
    import dask
    import distributed  # noqa: F401  (registers the nanny's configuration)

    assert "MALLOC_TRIM_THRESHOLD_" in dask.config.get("distributed.nanny.pre-spawn-environ")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.setenv("PAPERFLOWS_TEST_KEPT", "kept")
    monkeypatch.delenv(FRESH_ENV, raising=False)
    stored, fresh = paper_process_environment(fresh=False), paper_process_environment(fresh=True)
    assert "MALLOC_TRIM_THRESHOLD_" not in stored and "MALLOC_TRIM_THRESHOLD_" not in fresh
    assert stored["PAPERFLOWS_TEST_KEPT"] == fresh["PAPERFLOWS_TEST_KEPT"] == "kept"
    assert FRESH_ENV not in stored and fresh[FRESH_ENV] == "1"


def test_a_worker_refuses_a_paper_whose_code_or_params_differ_in_its_clone(repo_copy):
    repo, _ = repo_copy
    first, second = CHEAP_PAPERS
    before = inputs_digests(repo, [first, second])
    (repo / "results" / "SUMMARY.md").write_text("rewritten by a stage\n")
    (repo / "records" / first / "meta.json").write_text("{}\n")   # the records stage's output, the evaluation's input
    (repo / "README.md").write_text("edited during the run\n")
    edit(repo / "flows" / second / "method.py")
    after = inputs_digests(repo, [first, second])
    assert after[first] == before[first], "outputs, docs and another paper's code are not part of a paper's digest"
    assert after[second] != before[second], "an uncommitted change to the paper's code is part of its digest"
    raw = yaml.safe_load((repo / "params.yaml").read_text())
    raw["papers"][first]["seeds"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert inputs_digests(repo, [first])[first] != before[first], "so is a change to the paper's params"
    with pytest.raises(RuntimeError, match="check out the same code and params"):
        run_paper_stages(first, before[first], str(repo))


def edit(path):
    path.write_text(path.read_text() + "\n# edited during the run\n")


def test_a_paper_whose_code_changed_here_while_it_ran_is_left_out(repo_copy, monkeypatch):
    """DVC would record its outputs against the new code: they are not put in place, and it counts as failed."""
    from distributed import LocalCluster

    repo, _ = repo_copy
    first, second = CHEAP_PAPERS

    def stages_edited_meanwhile(slug, expected_inputs, driver_repo, stored_records=None):
        if slug == first:
            edit(repo / "flows" / first / "method.py")
        return {folder: {"from_the_worker.txt": b"new"} for folder in scaleout.OUTPUT_FOLDERS}

    monkeypatch.setattr(scaleout, "run_paper_stages", stages_edited_meanwhile)   # the tasks run in this process
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        failed = scaleout.repro_on_dask([first, second], {first: 2.0, second: 1.0}, cluster.scheduler_address,
                                        root=repo, echo=lambda line: None)
    assert failed == [first]
    assert not (repo / "results" / first / "from_the_worker.txt").exists()
    assert (repo / "results" / second / "from_the_worker.txt").read_bytes() == b"new"


def test_a_paper_edited_here_after_its_outputs_arrived_is_not_recorded(repo_copy, monkeypatch):
    """Its outputs arrived intact, but the commit after the last paper would pair them with the new code."""
    from distributed import LocalCluster

    repo, _ = repo_copy
    edited = []

    def edit_the_first_to_arrive(line):   # the driver reports an arrival after putting its outputs in place
        if line.startswith("[1/2]"):
            edited.append(line.split()[1])
            edit(repo / "flows" / edited[0] / "method.py")

    monkeypatch.setattr(scaleout, "run_paper_stages", lambda slug, *args, **kwargs: {
        folder: {"from_the_worker.txt": slug.encode()} for folder in scaleout.OUTPUT_FOLDERS})
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        failed = scaleout.repro_on_dask(list(CHEAP_PAPERS), dict.fromkeys(CHEAP_PAPERS, 1.0),
                                        cluster.scheduler_address, root=repo, echo=edit_the_first_to_arrive)
    assert failed == edited
    assert all((repo / "results" / slug / "from_the_worker.txt").exists() for slug in CHEAP_PAPERS)


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
    # the local cluster's nanny exports its MALLOC_TRIM_THRESHOLD_ to no process: not to this driver either
    sh([sys.executable, "-c", "import os, sys; from paperflows.scaleout import repro_on_dask; "
                              f"failed = repro_on_dask(['{first}'], {{'{first}': 1.0}}, workers=2); "
                              "sys.exit(f'failed: {failed}' if failed else 'MALLOC_TRIM_THRESHOLD_ set in the driver' "
                              "if 'MALLOC_TRIM_THRESHOLD_' in os.environ else 0)"],
       repo, {key: value for key, value in env.items() if key != "MALLOC_TRIM_THRESHOLD_"})
    meta = json.loads((repo / "records" / first / "meta.json").read_text())
    assert meta["seeds_run"] == [meta["seeds"][-1]], "only the added seed ran on the worker"
    assert_serial_run_agrees(first)


def test_a_scaled_out_run_rescores_the_stale_evaluations_of_unchanged_records_in_one_process(monkeypatch):
    """A paper whose records stage is stale goes to Dask; one whose records are current but whose evaluation is stale
    (an edit to the statistics) is re-scored here, and every finished stage is recorded with one ``dvc commit``
    instead of the last ``dvc repro`` rewriting ``dvc.lock`` after each evaluation."""
    import subprocess

    from paperflows import repro, scoring

    calls = []
    monkeypatch.setattr(repro, "stages_to_run", lambda slugs: ["a", "a-eval", "b-eval", "c-eval"])
    monkeypatch.setattr(scaleout, "repro_on_dask", lambda chosen, *args, **kwargs: calls.append(("dask", chosen)) or [])
    monkeypatch.setattr(scoring, "evaluate_paper", lambda slug: calls.append(("evaluate", slug)) or {"wall_s": 0.0})
    monkeypatch.setattr(repro, "commit_stages", lambda names: calls.append(("commit", list(names))))
    monkeypatch.setattr(subprocess, "run", lambda args, **kwargs: calls.append(("run", args[1:])) or
                        subprocess.CompletedProcess(args, 0))
    assert repro.repro_scaled_out(["a", "b", "c"], (), None, 2, echo=lambda line: None) == 0
    assert calls == [("dask", ["a"]), ("evaluate", "b"), ("evaluate", "c"),
                     ("commit", ["a", "a-eval", "b-eval", "c-eval"]), ("run", ["repro"])]

    # a re-scoring that fails still records what the workers finished
    calls.clear()
    monkeypatch.setattr(scoring, "evaluate_paper", lambda slug: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        repro.repro_scaled_out(["a", "b", "c"], (), None, 2, echo=lambda line: None)
    assert calls == [("dask", ["a"]), ("commit", ["a", "a-eval"])]
