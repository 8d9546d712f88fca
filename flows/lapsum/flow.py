"""LapSum, the experiment: exactness and gradients of the closed-form soft top-k, CPU runtime scaling against the
baselines, learn-to-select with large k, and a top-2 loss on digits.

Records: ``scaling`` (one CPU-time measurement per method and n, taken once before the seeds), and per seed
``correctness`` (one row of worst-case errors), ``alpha_sweep`` (the hard-limit sweep), ``select`` (per k and
method, equal steps), ``select_budget`` (per method at an equal CPU budget, and the control) and ``digits`` (per
loss). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.lapsum import method
from flows.lapsum.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_task
from tasks.data import save_bundled


# Not seed-separable: the runtime scaling is measured once per run, before the seeds (stored under the first seed).
@paper_experiment("lapsum", Params, smoke=SMOKE)
def lapsum_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """LapSum's correctness, runtime scaling, learn-to-select and digits top-2 loss."""
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))

    # Runtime scaling alone, before the seeds start, so that nothing else competes for the cores.
    scaling = pd.DataFrame(run_task(method.run_scaling, p=params)).assign(seed=ctx.seeds[0])
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, digits=digits_path)

    def per_seed_rows(part: str) -> pd.DataFrame:
        return pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r[part]])

    sweep = "alpha_sweep_normal_scores"
    return {
        "scaling": scaling,
        "correctness": pd.DataFrame([{"seed": r["seed"], **{k: v for k, v in r["correctness"].items() if k != sweep}}
                                     for r in per_seed]),
        "alpha_sweep": pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["correctness"][sweep]]),
        "select": per_seed_rows("select"),
        "select_budget": per_seed_rows("select_budget"),
        "digits": per_seed_rows("digits"),
    }
