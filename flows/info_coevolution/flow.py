"""Info-Coevolution, the experiment: online selective annotation with Bayesian fusion of model and kNN
predictions, gain-proportional sampling, dynamic rechecking and automatic stop, against full annotation, random
annotation and least-confidence active learning on a digits pool (10% labelled at the start).

Records: ``per_seed`` (one row per dataset and seed: every method's annotated share, accuracy, labels to the
target) and ``curves`` (accuracy against the annotated share, per dataset, method and seed). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.info_coevolution import method
from flows.info_coevolution.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every row comes from its own seed's split, model and annotation loop.
@paper_experiment("info_coevolution", Params, smoke=SMOKE, seed_separable=True)
def info_coevolution_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Info-Coevolution and its baselines on every dataset and seed."""
    with threadpool_limits(limits=1):  # one BLAS thread per task: the seeds are the parallelism
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["records"]])
    curves = pd.DataFrame([c for s in per_seed for c in s["curves"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    save_parquet(curves, ctx.data_dir / "curves.parquet")
    return {"per_seed": rows, "curves": curves}
