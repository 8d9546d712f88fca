"""``paperflows repro``: ``dvc repro`` with a plan up front and a progress line per paper.

DVC prints little while a stage runs, and a full run takes the better part of an hour, so this asks
``dvc status`` which paper stages will run (on a fresh clone: all of them, since their ``data/<slug>``
outputs are in no DVC cache), says how many and roughly how long from the committed runtimes before it starts,
then runs them one by one (``dvc repro <slug>``), printing each one's place in the queue, its time and the
elapsed total; a last ``dvc repro`` brings the summary (and anything else) up to date.
``papers`` restricts the run to a chosen subset, rerun even where DVC sees no change (``--force``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from paperflows.params import ParamsError, configured_slugs
from paperflows.stages import FRESH_ENV

EVAL_SUFFIX = "-eval"
EVAL_STAGE_S = 3.0
"""An evaluation stage: a process start, imports, the estimates and the report (no training)."""
STAGE_OVERHEAD_S = 15.0
"""Per stage, outside the flow body: a process start, imports, Prefect's bookkeeping and DVC's hashing (measured
about 10-20 s on 2 cores)."""


def _dvc(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dvc")), *args]


def paper_stage_names(slug: str) -> list[str]:
    """The DVC stages of a paper: its records stage ``<slug>``, then its evaluation ``<slug>-eval``."""
    return [slug, f"{slug}{EVAL_SUFFIX}"]


def stages_to_run(slugs: Sequence[str]) -> list[str]:
    """The paper stages ``dvc status`` reports as changed, in ``params.yaml`` order."""
    out = subprocess.run(_dvc("status", "--json"), capture_output=True, text=True, check=True).stdout
    changed = set(json.loads(out or "{}"))
    return [stage for slug in slugs for stage in paper_stage_names(slug) if stage in changed]


def expected_seconds(stages: Sequence[str], results_root: Path = Path("results")) -> float:
    """Rough wall time of running ``stages``: a paper's (or records) stage costs its committed flow-body time
    (``metrics.json``) plus the per-stage overhead, a paper without committed results the median of the
    others; an evaluation stage a few seconds."""
    slugs = [stage for stage in stages if not stage.endswith(EVAL_SUFFIX)]
    known = {}
    for slug in slugs:
        path = results_root / slug / "metrics.json"
        if path.is_file():
            body = json.loads(path.read_text()).get("metrics", {}).get("timings", {}).get("flow_body_s")
            if isinstance(body, (int, float)):
                known[slug] = float(body)
    fallback = sorted(known.values())[len(known) // 2] if known else 60.0
    return (sum(known.get(slug, fallback) + STAGE_OVERHEAD_S for slug in slugs)
            + EVAL_STAGE_S * (len(stages) - len(slugs)))


def choose(papers: Sequence[str], slugs: Sequence[str]) -> list[str]:
    unknown = sorted(set(papers) - set(slugs))
    if unknown:
        raise ParamsError(f"unknown paper(s) {', '.join(unknown)}; known: {', '.join(slugs)}")
    return [slug for slug in slugs if slug in set(papers)]


def repro(echo: Callable[[str], None] = print, papers: Sequence[str] = (), rescore: bool = False) -> int:
    """Run every changed paper (or the ``papers`` given, forced), then the rest of the pipeline; returns the
    exit code of the first failure (or 0). ``rescore``: only the evaluation stages of the split papers (of
    ``papers``, or all), forced, on the committed records: what a fresh clone can do without training."""
    slugs = configured_slugs()
    if rescore:
        queue = [stage for slug in (choose(papers, slugs) if papers else slugs)
                 for stage in paper_stage_names(slug)[1:]]
    elif papers:
        queue = [stage for slug in choose(papers, slugs) for stage in paper_stage_names(slug)]
    else:
        queue = stages_to_run(slugs)
    forced = bool(papers) or rescore
    estimate = expected_seconds(queue)
    echo(f"{len(queue)} stages of {len(slugs)} papers to run" + (f": {', '.join(queue)}" if queue else "")
         + (f"; expected about {_clock(estimate)} (committed runtimes; 2 cores)" if queue else ""))
    started = time.monotonic()
    if rescore:  # one DVC call for every evaluation stage, then the summary; nothing that would retrain
        code = subprocess.run(_dvc("repro", "--single-item", "--force", *queue, "summary")).returncode
        echo(f"re-scored {len(queue)} papers in {_clock(time.monotonic() - started)}" if code == 0
             else f"dvc repro failed (exit {code})")
        return code
    for position, stage in enumerate(queue, 1):
        echo(f"[{position}/{len(queue)}] {stage} ... (elapsed {_clock(time.monotonic() - started)})")
        stage_started = time.monotonic()
        # a forced run starts the records afresh instead of appending to the stored ones
        env = {**os.environ, **({FRESH_ENV: "1"} if forced else {})}
        code = subprocess.run(_dvc("repro", "--single-item", *(["--force"] if forced else []), stage), env=env).returncode
        verb = "done" if code == 0 else f"FAILED (exit {code})"
        echo(f"[{position}/{len(queue)}] {stage} {verb} in {time.monotonic() - stage_started:.0f} s "
             f"(elapsed {_clock(time.monotonic() - started)})")
        if code:
            return code
    code = subprocess.run(_dvc("repro")).returncode
    echo(f"all stages up to date in {_clock(time.monotonic() - started)}" if code == 0 else f"dvc repro failed (exit {code})")
    return code


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
