"""Wait-less OLP, the experiment: regret of every policy over T on each instance, and the LP-every-step timing.

Records: ``regret`` (one row per seed, T and policy) and ``timing`` (one row per timed instance and policy).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.waitless_olp import method
from flows.waitless_olp.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_parquet

TIMED = ("lp_every_step", "waitless", "first_order")


# Not seed-separable: the timing runs on the first `timing_instances` seeds of the run.
@paper_experiment("waitless_olp", Params, smoke=SMOKE)
def waitless_olp_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Wait-less OLP against first-order and LP-every-step on stochastic-input instances."""
    instances, budgets = run_task(method.instance_tables, p=params, seeds=ctx.seeds)
    save_parquet(instances, ctx.data_dir / "instances.parquet")
    save_parquet(budgets, ctx.data_dir / "budgets.parquet")
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    # The timed instances run one after the other in a single task, after the seeds: wall times compare.
    timing = run_task(method.run_timings, p=params, seeds=ctx.seeds[:params.timing_instances])
    regret = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["rows"]])
    timed = pd.DataFrame([{"seed": t["seed"], "T": t["T"], "f": t["f"], "policy": name, **t[name]}
                          for t in timing for name in TIMED])
    return {"regret": regret, "timing": timed}
