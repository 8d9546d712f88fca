"""Heterogeneous Label Shift, the experiment: HLSAN (reconstructed) against domain-adversarial HDA without
label-shift weighting, post-hoc BBSE, no alignment and target-only, on two synthetic modalities of the digits under
Dirichlet target priors (plus a no-shift setting as the control).

Records: ``per_seed`` (one row per seed, label-shift setting and method: target accuracy, the true and estimated
label-shift weights and their errors; ``seed`` is the run's seed, ``eval_seed`` the seed the data were drawn with).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.heterogeneous_label_shift import method
from flows.heterogeneous_label_shift.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet

EVAL_SEED_OFFSET = 1000
"""Evaluation seed = run seed + this; the development runs used seeds 0 and 100 (decided before the rerun)."""


# Seed-separable: every seed draws its own split, encoding and target priors.
@paper_experiment("heterogeneous_label_shift", Params, smoke=SMOKE, seed_separable=True)
def heterogeneous_label_shift_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every method under every label-shift setting, on every seed's fresh data."""
    # seed 0 served in development (see the notes): the evaluation seeds are moved past every development seed
    per_seed = over_seeds(method.run_seed, [s + EVAL_SEED_OFFSET for s in ctx.seeds], p=params)
    rows = pd.DataFrame([r for seed_rows in per_seed for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"per_seed": rows.rename(columns={"seed": "eval_seed"}).assign(seed=rows["seed"] - EVAL_SEED_OFFSET)}
