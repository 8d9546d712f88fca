"""Deep data re-uploading circuits, the experiment: every circuit configuration (dataset, D, N, L, R) trained on
every seed, with its train and test accuracy and the D2 diagnostics of its mean encoded state.

Records: ``runs`` (one row per configuration and seed). Scored by ``evaluate.py`` against the claims in
``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.quantum_reuploading import method
from flows.quantum_reuploading.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet
from tasks.train import torch_single_thread


# Seed-separable: each (seed, configuration) draws its data from (seed, dataset, D) and its initial angles from
# (seed, N, L, R) alone.
@paper_experiment("quantum_reuploading", Params, smoke=SMOKE, seed_separable=True)
def quantum_reuploading_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Deep-narrow against wide data re-uploading circuits, with repetition and permuted-label controls."""
    jobs = method.build_jobs(params)
    pairs = [(s, j) for j in jobs for s in ctx.seeds]  # most expensive jobs first
    with torch_single_thread():  # jobs already run in parallel threads; intra-op threads only oversubscribe
        results = run_mapped(method.run_job, {"seed": [s for s, _ in pairs], "job": [j for _, j in pairs]}, p=params)
    rows = pd.DataFrame(results).sort_values(["dataset", "D", "N", "R", "seed"]).reset_index(drop=True)
    save_parquet(rows, ctx.data_dir / "runs.parquet")
    return {"runs": rows}
