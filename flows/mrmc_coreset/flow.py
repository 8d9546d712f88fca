"""MRMC (reconstructed), the experiment: core-sets by maximum reduction of the squared loss over early proxy
epochs, with a class-balance constraint, against Random, Herding, Forgetting and EL2N core-sets of equal size on
scikit-learn digits and a noisy 10-class make_classification pool, and the selection timing.

Records: ``per_seed`` (one row per seed, pool, method and core-set size), ``diagnostics`` (one row per seed and
pool: what the contribution ranks by) and ``timing`` (one row per timed repeat and scorer). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.mrmc_coreset import method
from flows.mrmc_coreset.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_parquet


# Not seed-separable: the selection timing runs once, on the first seed of the run.
@paper_experiment("mrmc_coreset", Params, smoke=SMOKE)
def mrmc_coreset_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """MRMC (reconstructed) against equal-size core-sets, and the cost of its selection against Forgetting's."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([row for out in per_seed for row in out["rows"]])
    diagnostics = pd.DataFrame([row for out in per_seed for row in out["diagnostics"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    # timed alone, after the seeds, so the two scorers never compete with the seed threads
    timing = run_task(method.time_scorers, p=params, seed=ctx.seeds[0])
    save_parquet(timing, ctx.data_dir / "timing.parquet")
    return {"per_seed": rows, "diagnostics": diagnostics, "timing": timing.assign(seed=ctx.seeds[0])}
