"""A2I, the experiment: per seed, RNP and FR rationalizers with and without the attack-and-instruction step (and
an A/A replicate of RNP) on synthetic multi-aspect reviews with exact ground-truth rationales; rationale F1,
accuracy, and a fresh attacker's success rate against every frozen predictor.

Records: ``runs`` (one row per seed and method). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.a2i_rationale import method
from flows.a2i_rationale.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every seed draws its own reviews, initialisations and noise streams.
@paper_experiment("a2i_rationale", Params, smoke=SMOKE, seed_separable=True)
def a2i_rationale_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """RNP and FR against A2I-RNP and A2I-FR, with the A/A replicate, and the post-hoc attack on each."""
    method.wordpiece_vocabulary()                     # load MiniLM once, before the seed threads
    method.wordpiece_vocabulary(params.embed_dim)
    rows = pd.DataFrame([r for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params) for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"runs": rows}
