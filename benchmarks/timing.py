"""The one timing rule the benchmark scripts share: the best of ``reps`` wall-clock calls."""

from __future__ import annotations

import time
from typing import Callable


def best_time(fn: Callable[[], object], reps: int) -> float:
    """Minimum wall time of ``reps`` calls of ``fn``, in seconds (the least disturbed by other load)."""
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)
