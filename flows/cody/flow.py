"""CoDy, the experiment: MCTS counterfactual search (four selection policies) against GreeDy, iRand and two
factual rankings, at one budget of model calls, on a self-trained TGAT-lite link predictor over a synthetic
user-item stream with planted causal motifs.

Records: ``explanations`` (one row per seed, explained event and explainer: counterfactual found, sparsity, size,
model calls) and ``models`` (one row per seed: the link predictor's test scores and the stream's motif share).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.cody import method
from flows.cody.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet

MODEL_SCORES = ("test_auc", "test_accuracy", "positive_rate", "motif_share")


# Seed-separable: each seed builds its own stream, model and explained events.
@paper_experiment("cody", Params, smoke=SMOKE, seed_separable=True)
def cody_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every explainer on every seed's explained events, at the same budget of model calls."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    save_parquet(rows, ctx.data_dir / "explanations.parquet")
    models = pd.DataFrame([{"seed": s["seed"], **{k: s[k] for k in MODEL_SCORES}} for s in per_seed])
    return {"explanations": rows, "models": models}
