"""``paperflows repro``: ``dvc repro`` with a plan up front and a progress line per paper.

DVC prints little while a stage runs, and a full run takes the better part of an hour, so this asks
``dvc status`` which paper stages will run (on a fresh clone: all of them, since their ``data/<slug>``
outputs are in no DVC cache), says how many and roughly how long from the committed runtimes before it starts,
then runs their commands one by one (those of ``dvc.yaml``; a paper whose records stage runs is evaluated after
it), printing each one's place in the queue, its time and the elapsed total, and records the finished stages
with one ``dvc commit`` (:func:`run_stages`); a last ``dvc repro`` brings the summary (and anything else) up to
date. ``dvc repro <stage>`` per stage would re-parse and re-write the whole 114-stage ``dvc.lock`` after each
one: about 9 s of CPU per stage on the 2-core Zen 3, 17 min over a full run.
``papers`` restricts the run to a chosen subset, rerun even where DVC sees no change (records from scratch); the other
papers are left as they are. ``rescore`` runs only evaluation stages, in one process, recorded with ``dvc commit``;
``dask_address``/``workers`` spread the papers over Dask workers (:mod:`paperflows.scaleout`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import yaml

from paperflows.params import ParamsError, configured_slugs

EVAL_SUFFIX = "-eval"
EVAL_STAGE_S = 3.0
"""An evaluation stage: a process start, imports, the estimates and the report (no training)."""
STAGE_OVERHEAD_S = 15.0
"""Per stage, outside the flow body: a process start, imports, Prefect's bookkeeping and DVC's hashing (measured
about 10-20 s on 2 cores)."""


def _dvc(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dvc")), *args]


def paperflows_command(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """``python -m paperflows <args>`` as a fresh process (this interpreter); raises with the tail of its output
    when it fails."""
    done = subprocess.run([sys.executable, "-m", "paperflows", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"paperflows {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-2000:]}")


def papers_of(stages: Sequence[str]) -> list[str]:
    """The papers of paper stages ``stages`` (records ``<slug>`` or evaluation ``<slug>-eval``), in order, once each."""
    return list(dict.fromkeys(stage.removesuffix(EVAL_SUFFIX) for stage in stages))


def paper_stage_names(slug: str) -> list[str]:
    """The DVC stages of a paper: its records stage ``<slug>``, then its evaluation ``<slug>-eval``."""
    return [slug, f"{slug}{EVAL_SUFFIX}"]


def stages_to_run(slugs: Sequence[str]) -> list[str]:
    """The paper stages ``dvc status`` reports as changed, in ``params.yaml`` order."""
    out = subprocess.run(_dvc("status", "--json"), capture_output=True, text=True, check=True).stdout
    changed = set(json.loads(out or "{}"))
    return [stage for slug in slugs for stage in paper_stage_names(slug) if stage in changed]


def upstream_stages(queue: Sequence[str], root: Path = Path(".")) -> list[str]:
    """The stages other than the papers' own (``pretrained``: the converted language models) whose outputs a stage
    of ``queue`` depends on, in ``dvc.yaml`` order. ``dvc repro`` would bring them up to date first; the stages'
    own commands do not, and ``dvc commit`` refuses a stage whose dependency does not exist (on a fresh clone a
    language-model paper whose records are reused never loads a model, so nothing else makes ``data/_pretrained``)."""
    stages = yaml.load((root / "dvc.yaml").read_text(), Loader=yaml.CSafeLoader)["stages"]
    made_by = {path: name for name, stage in stages.items() for out in stage.get("outs", [])
               for path in ([out] if isinstance(out, str) else out)}
    needed = {made_by[dep] for name in queue for dep in stages.get(name, {}).get("deps", []) if dep in made_by}
    return [name for name in stages if name in needed
            and not name.endswith(EVAL_SUFFIX) and f"{name}{EVAL_SUFFIX}" not in stages]


def bring_up_to_date(stages: Sequence[str], echo: Callable[[str], None] = print) -> int:
    """``dvc repro --single-item`` of each of ``stages`` (nothing to do where one is current); the exit code of
    the first that fails, or 0."""
    for name in stages:
        echo(f"{name}: brought up to date first (queued papers depend on it)")
        code = subprocess.run(_dvc("repro", "--single-item", name), capture_output=True, text=True).returncode
        if code:
            echo(f"dvc repro {name} failed (exit {code}): the paper stages that depend on it cannot be recorded")
            return code
    return 0


def committed_seconds(slugs: Sequence[str], results_root: Path = Path("results")) -> dict[str, float]:
    """Each paper's committed flow-body time (``metrics.json``); the median of the others for a paper without
    committed results."""
    known = {}
    for slug in slugs:
        path = results_root / slug / "metrics.json"
        if path.is_file():
            body = json.loads(path.read_text()).get("metrics", {}).get("timings", {}).get("flow_body_s")
            if isinstance(body, (int, float)):
                known[slug] = float(body)
    fallback = sorted(known.values())[len(known) // 2] if known else 60.0
    return {slug: known.get(slug, fallback) for slug in slugs}


def records_stage_seconds(slugs: Sequence[str], results_root: Path = Path("results")) -> dict[str, float]:
    """Rough wall time of each paper's records stage: its committed flow-body time plus the per-stage overhead."""
    return {slug: seconds + STAGE_OVERHEAD_S for slug, seconds in committed_seconds(slugs, results_root).items()}


def expected_seconds(stages: Sequence[str], results_root: Path = Path("results")) -> float:
    """Rough wall time of running ``stages`` one after the other: each records stage its
    :func:`records_stage_seconds`, an evaluation stage a few seconds."""
    slugs = [stage for stage in stages if not stage.endswith(EVAL_SUFFIX)]
    return sum(records_stage_seconds(slugs, results_root).values()) + EVAL_STAGE_S * (len(stages) - len(slugs))


COMMITTED_FINGERPRINT = Path("results") / "FINGERPRINT.txt"


def primitives_differing_from(reference: Path) -> list[str]:
    """The numeric primitives whose bits here differ from the fingerprint file ``reference`` (``paperflows
    fingerprint``'s lines), by name."""
    from paperflows.core.fingerprint import fingerprint, parse_fingerprint

    ours, theirs = fingerprint(), parse_fingerprint(reference.read_text())
    return sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))


def kernels_warning(reference: Path = COMMITTED_FINGERPRINT) -> str | None:
    """A line for a machine whose kernels compute other bits than those of the committed results: its records
    stages retrain every seed (stored records are keyed by the fingerprint) and the numbers may move."""
    differing = primitives_differing_from(reference) if reference.is_file() else []
    if not differing:
        return None
    return (f"this machine computes other bits than the committed results for {', '.join(differing)} "
            f"(`paperflows fingerprint --check {reference}`): every records stage that runs retrains all its seeds, "
            "and its numbers and verdicts may differ from the committed ones")


def records_made_otherwise(slugs: Sequence[str], root: Path = Path("."),
                           params_file: Path = Path("params.yaml")) -> dict[str, list[str]]:
    """For each paper whose stored records under ``root`` no records stage would reuse: what in their key differs
    from today's (``code``: the digest of the records stage's code; ``params``, apart from the seed counts;
    ``base_seed``; ``smoke``), or ``["no records"]``. The kernel fingerprint is left out: it is the machine's.

    ``dvc status`` cannot see this: a code edit recorded with ``dvc commit`` instead of a rerun makes ``dvc.lock``
    current while the records still carry the old digest, and a fresh clone's ``make repro`` then retrains that
    paper from scratch where it would have reused its records."""
    from paperflows.params import read_params_file, resolve_params
    from paperflows.stages import SEED_COUNTS, code_digest, records_dir

    raw = read_params_file(params_file)
    made_otherwise = {}
    for slug in slugs:
        meta = records_dir(root, slug) / "meta.json"
        if not meta.is_file():
            made_otherwise[slug] = ["no records"]
            continue
        key = json.loads(meta.read_text()).get("key", {})
        params, common = resolve_params(slug, raw)
        today = {"code": code_digest(slug), "smoke": False, "base_seed": common.seed,
                 "params": {k: v for k, v in params.model_dump(mode="json").items() if k not in SEED_COUNTS}}
        if differing := [part for part, value in today.items() if key.get(part) != value]:
            made_otherwise[slug] = differing
    return made_otherwise


def choose(papers: Sequence[str], slugs: Sequence[str]) -> list[str]:
    unknown = sorted(set(papers) - set(slugs))
    if unknown:
        raise ParamsError(f"unknown paper(s) {', '.join(unknown)}; known: {', '.join(slugs)}")
    return [slug for slug in slugs if slug in set(papers)]


def repro(echo: Callable[[str], None] = print, papers: Sequence[str] = (), rescore: bool = False,
          dask_address: str | None = None, workers: int = 0) -> int:
    """Run every changed paper (or the ``papers`` given, forced), then the rest of the pipeline; returns the
    exit code of the first failure (or 0). ``rescore``: only the evaluation stages of the split papers (of
    ``papers``, or all), forced, on the committed records: what a fresh clone can do without training.
    ``dask_address`` (or ``workers`` local processes): the papers run on Dask workers (:mod:`paperflows.scaleout`)."""
    slugs = configured_slugs()
    # first params/<slug>.yaml from params.yaml: the stages read params.yaml, DVC records their section's file
    code = subprocess.run(_dvc("repro", "--single-item", "params"), capture_output=True, text=True).returncode
    if code:
        echo("dvc repro params failed: run `paperflows check`")
        return code
    if not rescore and (warning := kernels_warning()):
        echo(warning)
    if dask_address or workers:
        return repro_scaled_out(slugs, papers, dask_address, workers, echo)
    if rescore:
        queue = [stage for slug in (choose(papers, slugs) if papers else slugs)
                 for stage in paper_stage_names(slug)[1:]]
    elif papers:
        queue = [stage for slug in choose(papers, slugs) for stage in paper_stage_names(slug)]
    else:   # a paper whose records stage runs is evaluated after it, here rather than by the last `dvc repro`
        stale = set(stages_to_run(slugs))
        queue = [stage for slug in slugs for stage in paper_stage_names(slug) if stage in stale or slug in stale]
    estimate = expected_seconds(queue)
    echo(f"{len(queue)} stages of {len(slugs)} papers to run" + (f": {', '.join(queue)}" if queue else "")
         + (f"; expected about {_clock(estimate)} (committed runtimes; 2 cores)" if queue else ""))
    started = time.monotonic()
    if rescore:
        code = rescore_in_one_process(queue, echo)
        echo(f"re-scored {len(queue)} papers in {_clock(time.monotonic() - started)}" if code == 0
             else f"re-scoring failed (exit {code})")
        return code
    # chosen papers are forced, and their records start afresh instead of appending to the stored ones
    code = bring_up_to_date(upstream_stages(queue), echo) or run_stages(queue, fresh=bool(papers), echo=echo)
    if code:
        return code
    code = subprocess.run(_dvc(*the_rest(papers))).returncode
    echo(f"done in {_clock(time.monotonic() - started)}" if code == 0 else f"dvc repro failed (exit {code})")
    return code


COMMIT_EVERY_S = 600.0
"""A serial run records its finished stages at least this often (a ``dvc commit`` costs about 10 s at 114 stages):
a run killed without a chance to clean up (``kill -9``, a power cut) then loses at most this much bookkeeping, on
top of the stage it was in. (Its outputs stay either way, and a records stage rerun finds its seeds stored.)"""


def run_stages(queue: Sequence[str], fresh: bool = False, echo: Callable[[str], None] = print,
               commit_every_s: float = COMMIT_EVERY_S) -> int:
    """Run the commands of the paper stages ``queue`` (names in ``./dvc.yaml``) one after the other, as ``dvc repro
    --single-item`` would, and record the stages that finished with ``dvc commit`` (:func:`commit_stages`): once
    ``commit_every_s`` has passed since the last, and at the end, also when a stage fails or the run is
    interrupted. ``fresh``: records from scratch. A paper whose code or params changed here while it ran is left
    out of the commit (DVC would pair its outputs with the new code) and named. Returns the exit code of the stage
    that failed, or 0."""
    from paperflows.scaleout import inputs_changed, inputs_digests, paper_process_environment

    root = Path(".")
    digests = inputs_digests(root, papers_of(queue)) if queue else {}
    commands = {name: stage["cmd"] for name, stage
                in yaml.load((root / "dvc.yaml").read_text(), Loader=yaml.CSafeLoader)["stages"].items()}
    env = paper_process_environment(fresh)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the stages' `paperflows`
    unrecorded: list[str] = []
    started = last_commit = time.monotonic()

    def record() -> None:
        nonlocal last_commit
        edited = inputs_changed(root, digests, papers_of(unrecorded))
        for slug in edited:
            echo(f"{slug}: its code or params changed here while it ran; its outputs stay in place but are not "
                 "recorded (rerun it)")
        if kept := [stage for stage in unrecorded if stage.removesuffix(EVAL_SUFFIX) not in edited]:
            commit_stages(kept)
        unrecorded.clear()
        last_commit = time.monotonic()

    try:
        for position, stage in enumerate(queue, 1):
            echo(f"[{position}/{len(queue)}] {stage} ... (elapsed {_clock(time.monotonic() - started)})")
            stage_started = time.monotonic()
            code = subprocess.run(commands[stage], shell=True, env=env).returncode
            verb = "done" if code == 0 else f"FAILED (exit {code})"
            echo(f"[{position}/{len(queue)}] {stage} {verb} in {time.monotonic() - stage_started:.0f} s "
                 f"(elapsed {_clock(time.monotonic() - started)})")
            if code:
                return code
            unrecorded.append(stage)
            if time.monotonic() - last_commit >= commit_every_s:
                record()
        return 0
    finally:
        record()


def the_rest(papers: Sequence[str]) -> list[str]:
    """The last DVC call: with chosen ``papers``, only the summary (the other papers stay as they are, stale or
    not); otherwise everything still stale (the summary, evaluation stages of unchanged records)."""
    return ["repro", "--single-item", "summary"] if papers else ["repro"]


def repro_scaled_out(slugs: Sequence[str], papers: Sequence[str], dask_address: str | None, workers: int,
                     echo: Callable[[str], None]) -> int:
    """The ``papers`` (or every paper whose records stage is stale) on Dask; then the stale evaluation stages of
    the other papers (records unchanged, e.g. after an edit to the statistics) re-scored in this process; all of
    them recorded with one ``dvc commit``; then :func:`the_rest`."""
    from paperflows.scaleout import repro_on_dask

    stale = [] if papers else stages_to_run(slugs)
    chosen = choose(papers, slugs) if papers else [s for s in stale if not s.endswith(EVAL_SUFFIX)]
    rescored = [s for s in stale if s.endswith(EVAL_SUFFIX) and s.removesuffix(EVAL_SUFFIX) not in chosen]
    started = time.monotonic()
    if code := bring_up_to_date(upstream_stages([s for slug in chosen for s in paper_stage_names(slug)]), echo):
        return code
    # chosen papers are forced and start afresh, as in a serial run; stale ones append to their stored records
    failed = repro_on_dask(chosen, records_stage_seconds(chosen), dask_address, workers, echo=echo,
                           fresh=bool(papers))
    done = [stage for slug in chosen if slug not in failed for stage in paper_stage_names(slug)]
    # one process for them all, instead of the last `dvc repro` rewriting dvc.lock after each (~9 s a stage)
    try:
        evaluate_in_one_process(rescored, echo)
    except Exception:
        commit_stages(done)   # what the workers finished stays recorded
        raise
    commit_stages(done + rescored)
    code = subprocess.run(_dvc(*the_rest(papers))).returncode
    echo(f"{len(chosen) - len(failed)} of {len(chosen)} papers in {_clock(time.monotonic() - started)}"
         + (f", {len(rescored)} re-scored" if rescored else "")
         + (f"; failed: {', '.join(failed)}" if failed else "") + ("" if code == 0 else f"; dvc failed (exit {code})"))
    return 1 if failed else code


def evaluate_in_one_process(eval_stages: Sequence[str], echo: Callable[[str], None] = print) -> None:
    """Run the commands of ``eval_stages`` (``paperflows evaluate <slug>`` each) in this process: the outputs ``dvc
    repro`` would write, without a process start and DVC's per-stage bookkeeping for each of them (the caller
    records them, :func:`commit_stages`)."""
    from paperflows.scoring import evaluate_paper

    for position, stage in enumerate(eval_stages, 1):
        summary = evaluate_paper(stage.removesuffix(EVAL_SUFFIX))
        echo(f"[{position}/{len(eval_stages)}] {stage} in {summary['wall_s']:.1f} s")


def rescore_in_one_process(eval_stages: Sequence[str], echo: Callable[[str], None] = print) -> int:
    """:func:`evaluate_in_one_process`, recorded with one ``dvc commit`` (:func:`commit_stages`); then the summary."""
    evaluate_in_one_process(eval_stages, echo)
    commit_stages(eval_stages)
    return subprocess.run(_dvc("repro", "--single-item", "summary")).returncode


def commit_stages(names: Sequence[str], root: Path = Path(".")) -> None:
    """``dvc commit --force`` of the stages ``names``, with ``dvc.lock`` written once. The command line writes the
    lock file once per stage, and each write re-parses and re-dumps all of it (about 4 s at 114 stages): 57 stages
    took 4 min that way. This is what `dvc commit` does for the stages of one file (``dvc.repo.commit``)."""
    from dvc.repo import Repo, lock_repo

    with Repo(str(root)) as repo, lock_repo(repo):
        stages = [info.stage for name in names for info in repo.stage.collect_granular(name)]
        for stage in stages:
            stage.save()
            stage.commit()
        if stages:
            stages[0].dvcfile.dump_stages(stages, update_pipeline=False)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
