"""``paperflows repro``: ``dvc repro`` with a progress line per paper.

DVC prints little while a stage runs, and a full run takes the better part of an hour, so this asks
``dvc status`` which paper stages will run, then runs them one by one (``dvc repro <slug>``), printing
each one's place in the queue, its time and the elapsed total; a last ``dvc repro`` brings the summary
(and anything else) up to date.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from paperflows.params import configured_slugs


def _dvc(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dvc")), *args]


def stages_to_run(slugs: Sequence[str]) -> list[str]:
    """The paper stages ``dvc status`` reports as changed, in ``params.yaml`` order."""
    out = subprocess.run(_dvc("status", "--json"), capture_output=True, text=True, check=True).stdout
    changed = set(json.loads(out or "{}"))
    return [slug for slug in slugs if slug in changed]


def repro(echo: Callable[[str], None] = print) -> int:
    """Run every changed paper, then the rest of the pipeline; returns the exit code of the first failure (or 0)."""
    slugs = configured_slugs()
    queue = stages_to_run(slugs)
    echo(f"{len(queue)} of {len(slugs)} papers to run" + (f": {', '.join(queue)}" if queue else ""))
    started = time.monotonic()
    for position, slug in enumerate(queue, 1):
        echo(f"[{position}/{len(queue)}] {slug} ... (elapsed {_clock(time.monotonic() - started)})")
        stage_started = time.monotonic()
        code = subprocess.run(_dvc("repro", "--single-item", slug)).returncode
        verb = "done" if code == 0 else f"FAILED (exit {code})"
        echo(f"[{position}/{len(queue)}] {slug} {verb} in {time.monotonic() - stage_started:.0f} s "
             f"(elapsed {_clock(time.monotonic() - started)})")
        if code:
            return code
    code = subprocess.run(_dvc("repro")).returncode
    echo(f"all stages up to date in {_clock(time.monotonic() - started)}" if code == 0 else f"dvc repro failed (exit {code})")
    return code


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
