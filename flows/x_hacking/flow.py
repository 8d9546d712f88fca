"""X-hacking, the experiment: random sampling vs multi-objective BO searching defensible models whose SHAP share
of a chosen feature is halved, on bundled tables and a synthetic redundancy sweep, and the redundancy of every
target feature.

Records: ``runs`` (one row per table, target, searcher and seed, with the target's redundancy), ``trials`` (every
trial of every search), ``units`` (the wall time of each (table, seed) search unit) and ``timing`` (the search
and experiment wall times). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from flows.x_hacking import method
from flows.x_hacking.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_bundled


# Not seed-separable: the synthetic sweep runs on the first `synth_seeds` seeds of the run.
@paper_experiment("x_hacking", Params, smoke=SMOKE)
def x_hacking_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Random sampling and MO-BO searching for defensible X-hacked models, and the redundancy of each target."""
    started = time.perf_counter()
    data_dir = str(ctx.data_dir)
    for name in params.datasets:  # the bundled tables as Parquet (features + raw ``target``) under data/x_hacking/
        save_bundled(name, ctx.data_dir / f"{name}.parquet")
    synth = [method.synthetic_name(k) for k in params.synth_n_redundant]  # generated in the units, not stored
    units = [(d, s) for s in ctx.seeds for d in params.datasets] + [(d, s) for s in ctx.seeds[:params.synth_seeds] for d in synth]
    results = run_mapped(method.run_unit, {"dataset": [u[0] for u in units], "seed": [u[1] for u in units]},
                         p=params, data_dir=data_dir)
    search_s = time.perf_counter() - started

    runs = pd.DataFrame([r for res in results for r in res["runs"]])
    trials = pd.DataFrame([t for res in results for t in res["trials"]])
    # Redundancy of each distinct target feature (bundled tables do not depend on the seed).
    runs["data_seed"] = np.where(runs["dataset"].str.startswith("synth_r"), runs["seed"], 0)
    keys = runs[["dataset", "data_seed", "feature"]].drop_duplicates().sort_values(["dataset", "data_seed", "feature"])
    r2 = run_mapped(method.redundancy_for, {"dataset": keys["dataset"].tolist(), "seed": keys["data_seed"].tolist(),
                                            "feature": keys["feature"].tolist()}, p=params, data_dir=data_dir)
    runs = runs.merge(keys.assign(redundancy_r2=r2), on=["dataset", "data_seed", "feature"]).drop(columns="data_seed")
    runs = runs.sort_values(["dataset", "rank", "searcher", "seed"]).reset_index(drop=True)
    return {
        "runs": runs,
        "trials": trials,
        "units": pd.DataFrame([{"seed": s, "dataset": d, "seconds": r["seconds"]} for (d, s), r in zip(units, results)]),
        # one timing of the whole run, filed under its first seed
        "timing": pd.DataFrame([{"seed": ctx.seeds[0], "search_s": search_s,
                                 "experiment_s": time.perf_counter() - started}]),
    }
