"""P2P, the experiment: superpixel selector + predictor against pixel-level, global-mask, saliency and
random-superpixel baselines on digits pasted on textured noise, clean and with a planted confounder.

Records: ``per_seed`` (one row per seed: precision, accuracy, kept fractions, confounder shares, data statistics,
and the accuracy-sparsity curves as list columns). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.p2p import method
from flows.p2p.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: each seed draws its own data from its own streams and trains its own models.
@paper_experiment("p2p", Params, smoke=SMOKE, seed_separable=True)
def p2p_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """P2P and its baselines, one data draw and training per seed."""
    rows = pd.DataFrame(over_seeds(method.run_seed, ctx.seeds, p=params))
    save_parquet(rows[[k for k in rows.columns if not k.startswith("curve_")]], ctx.data_dir / "per_seed.parquet")
    return {"per_seed": rows}
