"""Ranked from Within, the experiment: a zoo of small digit classifiers per seed, their label-free ranking signals
on unlabeled shifted digit targets, and the rank correlation of every ranker with the models' true accuracy.

Records: ``model_scores`` (one row per seed, target and model: true accuracy and every signal) and ``rankings``
(one row per seed, ranker and target: Spearman rho and Kendall tau against the true accuracies). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.lmm_rank_unsup import method
from flows.lmm_rank_unsup.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every seed draws its own split, trains its own zoo and builds its own targets.
@paper_experiment("lmm_rank_unsup", Params, smoke=SMOKE, seed_separable=True)
def lmm_rank_unsup_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """The zoo's signals and every ranker's rank correlation with true accuracy, per seed and target."""
    with threadpool_limits(limits=1):  # one BLAS thread per task: the seeds are the parallelism
        runs = sorted(over_seeds(method.run_seed, ctx.seeds, p=params), key=lambda r: r["seed"])
    models = pd.DataFrame([row for r in runs for row in r["models"]])
    save_parquet(models, ctx.data_dir / "model_scores.parquet")
    rankings = pd.DataFrame([{"seed": r["seed"], "ranker": ranker, "target": target, "rho": rho,
                              "tau": r["tau"][ranker][target]}
                             for r in runs for ranker, by_target in r["rho"].items() for target, rho in by_target.items()])
    return {"model_scores": models, "rankings": rankings}
