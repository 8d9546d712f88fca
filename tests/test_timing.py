"""tasks.timing: interleaved rounds and the equal-budget protocol, on a fake clock that each call advances by a
known cost, so every expected number is worked out by hand."""

import time

import numpy as np
import pytest
import torch

from tasks import timing
from tasks.train import torch_single_thread


class FakeClock:
    """A clock that only the calls move: ``call(name)`` advances it by ``cost[name]`` and logs the name."""

    def __init__(self, cost: dict[str, float]):
        self.now, self.cost, self.log = 0.0, cost, []

    def __call__(self) -> float:
        return self.now

    def call(self, name: str):
        def run():
            self.now += self.cost[name]
            self.log.append(name)
        return run


def test_rounds_time_every_call_once_each_in_a_drawn_order_after_the_warm_up():
    clock = FakeClock({"a": 1.0, "b": 3.0, "c": 0.5})
    seconds = timing.interleaved_seconds({n: clock.call(n) for n in "abc"}, rounds=4, warmup_rounds=2,
                                         order=np.random.default_rng(0), clock=clock)
    assert seconds == {"a": [1.0] * 4, "b": [3.0] * 4, "c": [0.5] * 4}
    assert clock.log[:6] == list("abcabc")   # the warm-up rounds, untimed, in the given order
    rounds = [clock.log[i:i + 3] for i in range(6, 18, 3)]
    assert all(sorted(r) == list("abc") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1, "the order is drawn per round"


def test_an_unordered_run_keeps_the_given_order_and_bad_counts_fail():
    clock = FakeClock({"a": 1.0, "b": 2.0})
    timing.interleaved_seconds({n: clock.call(n) for n in "ab"}, rounds=2, warmup_rounds=0, clock=clock)
    assert clock.log == list("abab")
    with pytest.raises(ValueError, match="rounds"):
        timing.interleaved_seconds({"a": clock.call("a")}, rounds=0)


def test_each_call_gets_its_own_budget_and_stops_after_the_step_that_reaches_it():
    # a costs 1 s a step, b 3 s: with 10 s each, a takes 10 steps and b 4 (3, 6, 9 < 10, then 12 >= 10)
    clock = FakeClock({"a": 1.0, "b": 3.0, "control": 1.0})
    taken = timing.interleaved_until_budget({n: clock.call(n) for n in ("a", "b", "control")},
                                            {"a": 10.0, "b": 10.0, "control": 2.5}, max_steps=100, clock=clock)
    assert taken == {"a": 10, "b": 4, "control": 3}
    assert clock.log[:3] == ["a", "b", "control"]   # side by side from the first round
    assert timing.interleaved_until_budget({"a": clock.call("a")}, {"a": 1e9}, max_steps=7, clock=clock) == {"a": 7}
    with pytest.raises(ValueError, match="different calls"):
        timing.interleaved_until_budget({"a": clock.call("a")}, {"b": 1.0}, max_steps=1)


def test_the_default_clock_ignores_time_spent_waiting():
    """A call that sleeps (as a loaded machine's waits would) costs next to no CPU time on the default clock."""
    with torch_single_thread():
        assert timing.cpu_clock() is time.thread_time
        seconds = timing.interleaved_seconds({"sleep": lambda: time.sleep(0.05)}, rounds=2, warmup_rounds=0)
    assert max(seconds["sleep"]) < 0.01
    if torch.get_num_threads() > 1:
        assert timing.cpu_clock() is time.process_time
