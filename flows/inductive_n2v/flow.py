"""Inductive node2vec, the experiment: iN2V against N2V with feature propagation or the plain extension, and
transductive N2V, on planted SBM graphs per homophily regime and train fraction, with permuted-label probes.

Records: ``settings`` (one row per seed, regime and train fraction: accuracies, gains, selections, graph
statistics). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.inductive_n2v import method
from flows.inductive_n2v.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: each seed draws its own graphs, splits, trainings and label permutations.
@paper_experiment("inductive_n2v", Params, smoke=SMOKE, seed_separable=True)
def inductive_n2v_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """iN2V against N2V + feature propagation and N2V + plain extension on SBM graphs."""
    with threadpool_limits(limits=1):  # one BLAS thread per task: the seeds are the parallelism
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([s for out in per_seed for s in out["settings"]])
    save_parquet(rows, ctx.data_dir / "settings.parquet")
    save_parquet(pd.DataFrame([d for out in per_seed for d in out["detail"]]), ctx.data_dir / "detail.parquet")
    return {"settings": rows}
