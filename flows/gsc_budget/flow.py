"""Generative social choice with budgets, the experiment: DemocraticProcess on the paper's synthetic agents with
exact and approximately accurate (brute-force, error-injected) queries, against a utilitarian greedy slate, a
cluster-then-summarize slate and random slates, every slate's deviations found by brute force over every
statement; and the vectorised deviation checker against the official triple loop.

Records: ``runs`` (one row per seed, agent type, budget, instance, method and query-error cell: the slate, its
utilities, its deviation ratios d[c] per slack c, cBJR and the cell's bound) and ``checker`` (the checker's largest
difference from the loop, on the run's first seed). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flows.gsc_budget import method
from flows.gsc_budget.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Not seed-separable: the checker sanity check runs on the first seed of the run only.
@paper_experiment("gsc_budget", Params, smoke=SMOKE)
def gsc_budget_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """DemocraticProcess and the baseline slates on every seed's synthetic instances, exact and approximate queries."""
    rows = pd.DataFrame([r for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params) for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "runs.parquet")
    checker = pd.DataFrame([{"seed": ctx.seeds[0], "max_abs_diff": _checker_check(ctx.seeds[0])}])
    return {"runs": rows, "checker": checker}


def _checker_check(seed: int) -> float:
    """The vectorised checker against the official triple loop on a tiny instance (m = 2, o = 3, n = 12)."""
    rng = np.random.default_rng([seed, 99])
    inst = method.make_instance(method.sample_opinions(rng, "uniform", 12, 2, 3), 3)
    oracle = method.SyntheticOracle(inst, method.EXACT, "random", rng)
    slate = method.democratic_process(oracle, inst.n, 2, 3, inst.max_level)
    worst = 0.0
    for sat in (method.assigned_utility(inst, slate), rng.integers(inst.min_level, inst.max_level + 1, inst.n)):
        worst = max(worst, float(np.abs(method.deviation_ratios(inst, sat, 3)
                                        - method.naive_deviation_ratios(inst, sat, 3)).max()))
    return worst

