"""What the benchmark scripts share: the best of ``reps`` wall-clock calls, and a paper run as a fresh process
under a given environment, timed."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def best_time(fn: Callable[[], object], reps: int) -> float:
    """Minimum wall time of ``reps`` calls of ``fn``, in seconds (the least disturbed by other load)."""
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def paper_run_seconds(slug: str, env: dict[str, str], out: Path) -> dict[str, float]:
    """``paperflows run <slug> --out <out>`` (default scale) as a fresh process with exactly ``env``: the flow
    body's own seconds (from its ``metrics.json``), and the user and system CPU seconds of the process and its
    children (the temporary Prefect server among them)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "paperflows", "run", slug, "--out", str(out)], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    metrics = json.loads((out / "results" / slug / "metrics.json").read_text())
    return {"flow_body_s": metrics["metrics"]["timings"]["flow_body_s"], "user_s": after.ru_utime - before.ru_utime,
            "sys_s": after.ru_stime - before.ru_stime}
