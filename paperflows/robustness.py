"""Seed robustness: rerun papers with ``common.seed`` shifted by an offset and compare verdicts claim by claim.

The offset is chosen once, here, before any result was seen, and never tuned: a reproduction whose
verdicts flip when the seeds move is reported as such. Runs go to ``.paperflows/robustness/offset-<N>/``,
never over ``results/``. Their verdicts, with the kernels' fingerprint digest they ran under, are written to
``results/robustness.json``; ``paperflows report``
compares them with the committed verdicts, marks each flip in ``SUMMARY.md`` and writes ``ROBUSTNESS.md``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Sequence

from paperflows.core.io import atomic_write_json
from paperflows.params import configured_slugs, read_params_file
from paperflows.repro import committed_seconds, paperflows_command
from paperflows.summary import ROBUSTNESS_FILE, load_metrics, load_robustness, write_robustness_report

OFFSET = 100  # seeds base+100, base+101, ...: disjoint from the committed ones (a paper has at most 100 seeds)


def shifted_run(slug: str, params_file: Path, out_root: Path, seed: int, rescore: bool) -> None:
    """Run (or, ``rescore``, only evaluate) one paper at ``common.seed = seed`` into ``out_root``, in a fresh
    process, as ``paperflows run`` does; raises with the tail of its output when it fails."""
    paperflows_command("evaluate" if rescore else "run", slug, "--out", str(out_root), "--params-file",
                       str(params_file), "--set", f"common.seed={seed}")


def robustness(slugs: Sequence[str] = (), offset: int = OFFSET, root: Path = Path("."),
               echo: Callable[[str], None] = print, rescore: bool = False, workers: int = 1) -> dict[str, Any]:
    """Rerun ``slugs`` (all configured papers when empty) at ``common.seed + offset``, ``workers`` papers at a
    time (each in its own process, longest first by committed runtimes); merge their verdicts into
    ``results/robustness.json`` (same offset) as each finishes, and rewrite ``results/ROBUSTNESS.md``; the summary
    stage (``paperflows report``, a ``dvc repro`` away) marks the flips in ``SUMMARY.md``. ``rescore``: score the
    records of an earlier robustness run again with today's evaluation code (no training), as an evaluation
    edit re-scores the committed records. A paper that fails is reported after the others are recorded."""
    root = Path(root).resolve()
    params_file = root / "params.yaml"
    slugs = list(slugs) or configured_slugs(params_file)
    seed = int((read_params_file(params_file).get("common") or {}).get("seed", 0)) + offset
    out_root = root / ".paperflows" / "robustness" / f"offset-{offset}"
    record = load_robustness(root / "results")
    if record.get("offset") != offset:
        record = {"offset": offset, "papers": {}}
    queue = sorted(slugs, key=committed_seconds(slugs, root / "results").get, reverse=True)
    echo(f"{len(queue)} papers at common.seed = {seed}, {workers} at a time" + (" (re-scored)" if rescore else ""))
    failed, started = [], time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(shifted_run, slug, params_file, out_root, seed, rescore): slug for slug in queue}
        for position, future in enumerate(as_completed(futures), 1):
            slug = futures[future]
            try:
                future.result()
            except RuntimeError as err:  # one paper's failure must not lose the others' verdicts
                failed.append(slug)
                echo(f"[{position}/{len(queue)}] {slug} FAILED: {err}")
                continue
            fresh = load_metrics(out_root / "results", slug)
            record["papers"][slug] = {"fingerprint": fresh.get("fingerprint"), "params": fresh.get("params"),
                                      "claims": {cid: {"verdict": result["verdict"], "role": result["role"]}
                                                 for cid, result in fresh["claims"].items()}}
            atomic_write_json(root / "results" / ROBUSTNESS_FILE, record)  # per paper: an interruption keeps them
            echo(f"[{position}/{len(queue)}] {slug} done (elapsed {time.monotonic() - started:.0f} s)")
    write_robustness_report(record, root / "results", configured_slugs(params_file))
    if failed:
        raise RuntimeError(f"{len(failed)} papers failed at shifted seeds (the others are recorded): {', '.join(failed)}")
    return record


if __name__ == "__main__":  # pragma: no cover - use `paperflows robustness`
    print(json.dumps(robustness(), indent=2))
