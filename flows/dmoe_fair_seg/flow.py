"""dMoE, the experiment: a TinyUNet with distribution-aware MoE layers (one noisy top-2 router per attribute group,
shared experts) against the plain UNet, a standard MoE, FiLM and group-balanced resampling on synthetic lesion images
whose image formation depends on an imbalanced group attribute.

Records: ``runs``, one row per seed, method and evaluation (``name`` tells the misrouted dMoE evaluation apart):
overall, worst-group, gap, ES and per-group Dice. Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flows.dmoe_fair_seg import method
from flows.dmoe_fair_seg.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet


@paper_experiment("dmoe_fair_seg", Params, smoke=SMOKE, seed_separable=True)
def dmoe_fair_seg_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every method trained and tested on each seed's synthetic lesion images."""
    # one task per (seed, method): eight-ish equal jobs balance better over the cores than one per seed
    jobs = [(s, m) for s in ctx.seeds for m in method.METHODS]
    results = run_mapped(method.run_method, {"seed": [s for s, _ in jobs], "method": [m for _, m in jobs]}, p=params)
    rows = pd.DataFrame([r for rs in results for r in rs])
    rows["name"] = np.where(rows["evaluation"] == "misrouted", "dmoe_misrouted", rows["method"])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"runs": rows}
