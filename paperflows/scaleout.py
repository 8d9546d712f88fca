"""Several machines on one reproduction: Dask workers run papers' stage commands, DVC records the results here.

One ``dask worker tcp://<scheduler>:8786`` per machine, each started in a clone of this repository at the same
commit (``PAPERFLOWS_REPO`` names the clone when the worker starts elsewhere; a worker refuses a paper whose code
or params there differ from this checkout's, as far as the paper's DVC stages depend on them), and ``paperflows
repro --dask-address tcp://<scheduler>:8786`` here. Each paper whose records stage is stale becomes one Dask task,
longest first (committed runtimes), so the last to finish is a short one. A task runs the paper's two stage commands
(``paperflows record <slug>``, then ``paperflows evaluate <slug>``) in a fresh process on its worker, into a scratch
folder, and sends back the paper's ``data/``, ``records/`` and ``results/`` folders as files. A stale paper's task
carries this checkout's stored records, so the worker runs only the seeds they lack (as a serial ``dvc repro``
appends); papers chosen by name run from scratch (as ``repro --papers`` does). This machine puts each folder in
place atomically as it arrives, then records every finished stage with one ``dvc commit`` (the outputs are those
``dvc repro`` would have written with the same code and params) and lets a last ``dvc repro`` bring the rest up to
date. Without an address, ``workers`` local processes stand in for the machines (``paperflows repro --workers 2``).

Why Dask and not Prefect work pools or DVC's experiment queue: DVC's queue runs its workers on the machine that
queued them, and a Prefect worker would leave each paper's outputs on the machine that ran it; a Dask future brings
the outputs back to the one checkout that DVC tracks, with nothing shared but the scheduler's address.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import yaml

from paperflows.core.io import replace_dir
from paperflows.params import read_params_file, stage_params_text
from paperflows.repro import paper_stage_names, paperflows_command
from paperflows.runners import NANNY_WITHOUT_MALLOC_TRIM
from paperflows.stages import FRESH_ENV

REPO_ENV = "PAPERFLOWS_REPO"  # on a worker: its clone of the repository (default: the driver's path)
OUTPUT_FOLDERS = ("data", "records", "results")  # <folder>/<slug>: what a paper's two stages write
# The nanny's variable (paperflows.runners.NANNY_WITHOUT_MALLOC_TRIM says what it costs): a local cluster starts
# without it, and a paper's processes run without what a user's own `dask worker` exports.
UNSET_FOR_PAPERS = tuple(key.rsplit(".", 1)[1] for key in NANNY_WITHOUT_MALLOC_TRIM)


def inputs_digests(repo: Path, slugs: Sequence[str]) -> dict[str, str]:
    """``{slug: digest}`` of what each paper's two stages read, as DVC compares it: the working-tree content of
    the tracked files among ``dvc.yaml``'s deps of ``<slug>`` and ``<slug>-eval`` (less the records that the
    first writes and the second reads), and the paper's params (its section and ``common``, as
    ``params/<slug>.yaml`` holds them). Two clones with the same digest run the paper with the same code and
    params, whatever else differs: other papers' code, docs, outputs landing during a run."""
    repo = Path(repo)
    stages = yaml.load((repo / "dvc.yaml").read_text(), Loader=yaml.CSafeLoader)["stages"]
    raw_params = read_params_file(repo / "params.yaml")
    deps_of = {}
    for slug in slugs:
        records_stage, eval_stage = paper_stage_names(slug)
        missing = [name for name in (records_stage, eval_stage) if name not in stages]
        if missing:
            raise RuntimeError(f"dvc.yaml in {repo} has no stage {missing[0]}: run `paperflows dvc-yaml` there")
        written = {next(iter(out)) if isinstance(out, dict) else out for out in stages[records_stage].get("outs", [])}
        deps_of[slug] = {dep for name in (records_stage, eval_stage) for dep in stages[name].get("deps", [])} - written
    every_dep = sorted(set().union(*deps_of.values()))
    tracked = set(filter(None, subprocess.run(["git", "ls-files", "-z", "--", *every_dep], cwd=repo,
                                              capture_output=True, check=True).stdout.decode().split("\0")))
    digests = {}
    for slug, deps in deps_of.items():
        digest = hashlib.md5(stage_params_text(raw_params, slug).encode())
        for name in sorted(name for name in tracked if any(name == dep or name.startswith(dep.rstrip("/") + "/")
                                                           for dep in deps)):
            path = repo / name
            digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<absent>") + b"\0")
        digests[slug] = digest.hexdigest()[:16]
    return digests


def inputs_changed(repo: Path, digests: dict[str, str], slugs: Sequence[str]) -> list[str]:
    """The papers of ``slugs`` whose code or params in ``repo`` differ now from ``digests`` (:func:`inputs_digests`,
    taken when they started): DVC would pair their outputs with the new code."""
    now = inputs_digests(repo, slugs) if slugs else {}
    return [slug for slug in slugs if now[slug] != digests[slug]]


def folder_files(folder: Path) -> dict[str, bytes]:
    """``{relative path: bytes}`` of every file under ``folder`` (empty when it does not exist)."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def write_folder_files(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (as :func:`folder_files` reads them) under ``folder``, which exists afterwards even when
    ``files`` is empty."""
    folder.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)


def paper_process_environment(fresh: bool) -> dict[str, str]:
    """This worker's environment for a paper's stage commands: without :data:`UNSET_FOR_PAPERS`, and with
    :data:`~paperflows.stages.FRESH_ENV` set when every seed is to be made from scratch."""
    env = {key: value for key, value in os.environ.items() if key not in UNSET_FOR_PAPERS}
    return {**env, **({FRESH_ENV: "1"} if fresh else {})}


def run_paper_stages(slug: str, expected_inputs: str, driver_repo: str,
                     stored_records: dict[str, bytes] | None = None) -> dict[str, dict[str, bytes]]:
    """On a worker: the paper's records and evaluation commands into a scratch folder, starting from
    ``stored_records`` (the driver's ``records/<slug>`` files: seeds already made under the same key are kept,
    as :func:`paperflows.core.records.grow_plan` decides) or, when None, from scratch; returns ``{folder:
    {relative path: bytes}}`` for each of :data:`OUTPUT_FOLDERS`. Refuses a clone whose code or params for the
    paper differ from the driver's (``expected_inputs``, :func:`inputs_digests`)."""
    repo = Path(os.environ.get(REPO_ENV, driver_repo))
    found = inputs_digests(repo, [slug])[slug]
    if found != expected_inputs:
        raise RuntimeError(f"the worker's clone {repo} has other code or params for {slug} ({found}) than the "
                           f"driver ({expected_inputs}): check out the same code and params on every machine")
    env = paper_process_environment(fresh=stored_records is None)
    with tempfile.TemporaryDirectory(prefix=f"paperflows-{slug}-") as scratch:
        if stored_records is not None:
            write_folder_files(Path(scratch) / "records" / slug, stored_records)
        for command in ("record", "evaluate"):
            paperflows_command(command, slug, "--out", scratch, cwd=repo, env=env)
        return {folder: folder_files(Path(scratch) / folder / slug) for folder in OUTPUT_FOLDERS}


def put_outputs(root: Path, slug: str, outputs: dict[str, dict[str, bytes]]) -> None:
    """Write a paper's outputs as they came from its worker, each folder swapped in whole (atomically)."""
    for folder, files in outputs.items():
        final = root / folder / slug
        staging = final.with_name(f".{slug}.incoming")
        write_folder_files(staging, files)  # a stage that wrote nothing under a folder still owns it
        replace_dir(staging, final)


def expected_makespan_s(durations: Sequence[float], machines: int) -> float:
    """The wall time of running ``durations`` longest first on ``machines`` one-at-a-time workers (the greedy
    schedule Dask follows when each worker takes the next task as it frees up)."""
    loads = [0.0] * max(1, machines)
    for duration in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += duration
    return max(loads)


def repro_on_dask(slugs: Sequence[str], durations: dict[str, float], address: str | None = None, workers: int = 2,
                  root: Path = Path("."), echo: Callable[[str], None] = print, fresh: bool = False) -> list[str]:
    """Run ``slugs`` on the Dask cluster at ``address`` (or a local one of ``workers`` processes), longest first
    by ``durations``; put each paper's outputs in place here as it finishes. Returns the papers that failed,
    and those whose code or params here changed since they were sent, checked as each arrives (its outputs are
    then left out) and once more after the last (they stay in place): the caller records only the rest, since
    DVC would pair those outputs with the new code. ``fresh``: every seed from scratch; otherwise each task
    carries this checkout's stored records."""
    import dask
    from distributed import Client, LocalCluster, as_completed

    root = Path(root).resolve()
    digests = inputs_digests(root, slugs)
    with dask.config.set(NANNY_WITHOUT_MALLOC_TRIM):  # else the nanny exports it here too, to dvc and the summary
        cluster = None if address else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                    dashboard_address=None)
    failed: list[str] = []
    try:
        with Client(address or cluster) as client:
            machines = len(client.scheduler_info()["workers"])
            queue = sorted(slugs, key=lambda slug: -durations[slug])
            makespan = expected_makespan_s([durations[slug] for slug in queue], machines)
            echo(f"{len(queue)} papers on {machines} Dask workers; expected about {makespan / 60:.0f} min "
                 f"(longest first, committed runtimes)")
            started = time.monotonic()
            futures = {client.submit(run_paper_stages, slug, digests[slug], str(root),
                                     None if fresh else folder_files(root / "records" / slug),
                                     key=f"paperflows-{slug}", pure=False): slug
                       for slug in queue}
            for position, future in enumerate(as_completed(futures), 1):
                slug = futures[future]
                try:
                    outputs = future.result()
                    if inputs_changed(root, digests, [slug]):
                        raise RuntimeError("its code or params changed here while it ran; its outputs are left "
                                           "out (rerun it)")
                    put_outputs(root, slug, outputs)
                    echo(f"[{position}/{len(queue)}] {slug} done (elapsed {time.monotonic() - started:.0f} s)")
                except Exception as err:  # one paper's failure must not lose the others' outputs
                    failed.append(slug)
                    echo(f"[{position}/{len(queue)}] {slug} FAILED: {err}")
    finally:
        if cluster is not None:
            cluster.close()
    # edited after its outputs arrived: the caller's commit would pair them with the new code
    for slug in inputs_changed(root, digests, [slug for slug in queue if slug not in failed]):
        failed.append(slug)
        echo(f"{slug}: its code or params changed here after its outputs arrived; they stay in place but are "
             "not recorded (rerun it)")
    return failed
