"""Seed robustness: rerun papers with ``common.seed`` shifted by an offset and compare verdicts claim by claim.

The offset is chosen once, here, before any result was seen, and never tuned: a reproduction whose
verdicts flip when the seeds move is reported as such. Runs go to ``.paperflows/robustness/offset-<N>/``,
never over ``results/``. Their verdicts, with the kernels' fingerprint digest they ran under, are written to
``results/robustness.json``; ``paperflows report``
compares them with the committed verdicts, marks each flip in ``SUMMARY.md`` and writes ``ROBUSTNESS.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

from paperflows.core.io import atomic_write_json
from paperflows.params import configured_slugs, read_params_file
from paperflows.pipeline import run_paper
from paperflows.scoring import evaluate_paper
from paperflows.summary import ROBUSTNESS_FILE, load_metrics, load_robustness, write_robustness_report

OFFSET = 100  # seeds base+100, base+101, ...: disjoint from the committed ones (a paper has at most 100 seeds)


def robustness(slugs: Sequence[str] = (), offset: int = OFFSET, root: Path = Path("."),
               echo: Callable[[str], None] = print, rescore: bool = False) -> dict[str, Any]:
    """Rerun ``slugs`` (all configured papers when empty) at ``common.seed + offset``; merge their verdicts
    into ``results/robustness.json`` (same offset) and rewrite ``results/ROBUSTNESS.md``; the summary stage
    (``paperflows report``, a ``dvc repro`` away) marks the flips in ``SUMMARY.md``. ``rescore``: score the
    records of an earlier robustness run again with today's evaluation code (no training), as an evaluation
    edit re-scores the committed records."""
    root = Path(root)
    params_file = root / "params.yaml"
    slugs = list(slugs) or configured_slugs(params_file)
    base = int((read_params_file(params_file).get("common") or {}).get("seed", 0))
    out_root = root / ".paperflows" / "robustness" / f"offset-{offset}"
    record = load_robustness(root / "results")
    if record.get("offset") != offset:
        record = {"offset": offset, "papers": {}}
    for position, slug in enumerate(slugs, 1):
        echo(f"[{position}/{len(slugs)}] {slug} at common.seed = {base + offset}" + (" (re-scored)" if rescore else ""))
        stages = evaluate_paper if rescore else run_paper
        stages(slug, params_file=params_file, out_root=out_root, overrides=[f"common.seed={base + offset}"])
        fresh = load_metrics(out_root / "results", slug)
        record["papers"][slug] = {"fingerprint": fresh.get("fingerprint"), "params": fresh.get("params"),
                                  "claims": {cid: {"verdict": result["verdict"], "role": result["role"]}
                                             for cid, result in fresh["claims"].items()}}
        atomic_write_json(root / "results" / ROBUSTNESS_FILE, record)  # per paper: an interrupted run keeps them
    write_robustness_report(record, root / "results", configured_slugs(params_file))
    return record


if __name__ == "__main__":  # pragma: no cover - use `paperflows robustness`
    print(json.dumps(robustness(), indent=2))
