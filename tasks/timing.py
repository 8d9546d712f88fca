"""Speed measured side by side: the calls being compared run interleaved, round by round, on one thread's CPU clock.

A speed claim timed one method after the other moves with the machine's load, which changes between the two
(#28: a wall-clock ratio flipped verdicts between two reruns at the same seeds). Interleaving makes every change
of load reach each call alike, and a CPU clock does not count the time a call waits for a core while other
processes run. A ratio of two calls' times from the same rounds then compares like with like.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
import torch


def cpu_clock() -> Callable[[], float]:
    """The calling thread's CPU clock (``time.thread_time``) when torch runs on one intra-op thread, where the
    whole of a CPU call (autograd included) runs in that thread; else the process CPU clock, which also counts
    torch's worker threads (and any other thread of the process)."""
    return time.thread_time if torch.get_num_threads() == 1 else time.process_time


def interleaved_seconds(calls: Mapping[str, Callable[[], object]], rounds: int, *, warmup_rounds: int = 1,
                        order: np.random.Generator | None = None,
                        clock: Callable[[], float | np.ndarray] | None = None) -> dict[str, list]:
    """Seconds of each call, ``{name: [seconds per round]}`` (``rounds`` values each): every round calls every
    function once, in ``calls``' order or, given ``order``, in a random order drawn from it per round (so no
    call always follows the same other call and inherits its cache state).

    ``warmup_rounds`` untimed rounds go first (first calls allocate and fill dispatch caches). ``clock``
    defaults to :func:`cpu_clock`; any clock whose differences are seconds will do, e.g. an array of the CPU
    and the wall clock read together, to report wall time beside CPU time from the same calls.
    """
    if rounds < 1 or warmup_rounds < 0:
        raise ValueError(f"rounds must be >= 1 and warmup_rounds >= 0, got {rounds} and {warmup_rounds}")
    clock = clock or cpu_clock()
    names = list(calls)
    for _ in range(warmup_rounds):
        for name in names:
            calls[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for j in (order.permutation(len(names)) if order is not None else range(len(names))):
            started = clock()
            calls[names[j]]()
            seconds[names[j]].append(clock() - started)
    return seconds


def interleaved_until_budget(steps: Mapping[str, Callable[[], object]], budget_s: Mapping[str, float],
                             max_steps: int, clock: Callable[[], float] | None = None) -> dict[str, int]:
    """The equal-budget protocol, side by side: ``{name: steps taken}``. Round by round, every ``steps[name]``
    whose CPU time so far is under ``budget_s[name]`` takes one more step (a whole step, so a call may end
    past its budget), until none is left or each has taken ``max_steps``.

    Run one after the other, a method's steps would depend on the load while it ran; interleaved, load drift
    slows every method alike. ``clock`` defaults to :func:`cpu_clock`.
    """
    if set(steps) != set(budget_s):
        raise ValueError(f"steps and budget_s name different calls: {sorted(steps)} vs {sorted(budget_s)}")
    clock = clock or cpu_clock()
    spent = dict.fromkeys(steps, 0.0)
    taken = dict.fromkeys(steps, 0)
    active = [name for name in steps if budget_s[name] > 0 and max_steps > 0]
    while active:
        for name in active:
            started = clock()
            steps[name]()
            spent[name] += clock() - started
            taken[name] += 1
        active = [name for name in active if spent[name] < budget_s[name] and taken[name] < max_steps]
    return taken
