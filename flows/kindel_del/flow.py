"""KinDEL, the experiment: the paper's benchmark protocol (models, random and disynthon splits, count columns,
on-/off-DNA held-out Kd correlations) on a simulated three-cycle DEL with a known pKd, across a sweep of the count
simulator's knobs.

Records: ``runs`` (one row per seed, simulator setting, model and split: RMSE and held-out Kd correlations) and
``library`` (one row per seed: the enumerated library it screened, the same for every seed). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.kindel_del import method
from flows.kindel_del.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task
from tasks.data import save_parquet


# Seed-separable: the library is enumerated from the params alone (no draw), and each seed draws its own ground
# truth and screens.
@paper_experiment("kindel_del", Params, smoke=SMOKE, seed_separable=True)
def kindel_del_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every model and split on every seed and simulator setting of the sweep."""
    grid = [(seed, d, n, l) for seed in ctx.seeds for d in params.depth for n in params.nonspecific
            for l in params.linker_penalty]
    with threadpool_limits(limits=1):  # one BLAS/OpenMP thread per task: the (seed, setting) tasks are the parallelism
        library = run_task(method.make_library, p=params)
        runs = run_mapped(method.run_benchmark, {"seed": [g[0] for g in grid], "depth": [g[1] for g in grid],
                                                  "nonspecific": [g[2] for g in grid],
                                                  "linker_penalty": [g[3] for g in grid]}, p=params, lib=library)
    frame = pd.DataFrame([row for rows in runs for row in rows])
    save_parquet(pd.DataFrame({"smiles": library.smiles, "a": library.synthons[:, 0], "b": library.synthons[:, 1],
                               "c": library.synthons[:, 2], "logp": library.logp}), ctx.data_dir / "library.parquet")
    save_parquet(frame, ctx.data_dir / "runs.parquet")
    described = {"compounds": len(library.smiles), "example_smiles": library.smiles[:3],
                 "mean_heavy_atoms": float(len(library.graphs.molecule) / len(library.smiles))}
    return {"runs": frame, "library": pd.DataFrame([{"seed": seed, **described} for seed in ctx.seeds])}
