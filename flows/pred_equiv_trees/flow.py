"""Predictive equivalence in decision trees, the experiment: per dataset and seed, CART and TreeFARMS trees,
their Blake-canonical-form / minimal-DNF representations, prediction under missing values, variable importance
and feature-acquisition cost.

Records: ``units`` (one row per dataset and seed, every scalar of the unit), ``missing`` (one row per dataset,
seed, missingness probability and mask), ``importance`` (one row per dataset, seed, measure and feature) and
``timing`` (the run's wall time). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from flows.pred_equiv_trees import method
from flows.pred_equiv_trees.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, paper_task, run_mapped
from tasks.data import save_parquet


@paper_task
def prepare_data(p: Params, seed: int, data_dir: str) -> list[str]:
    """Raw tables of ``p.datasets`` and their binarised train/test split for one seed, as Parquet."""
    paths = []
    for name in p.datasets:
        X, y, names = method.load_raw(name, p.planted_n, seed)
        raw = pd.DataFrame(X, columns=[str(n) for n in names]).assign(target=y)
        paths.append(str(save_parquet(raw, Path(data_dir) / f"{name}_raw.parquet")))
        paths.append(str(save_parquet(method.binary_table(p, name, seed), Path(data_dir) / f"{name}_binary_seed{seed}.parquet")))
    return paths


# Not seed-separable: the ``timing`` row is the wall time of all the run's units together (on the first seed).
@paper_experiment("pred_equiv_trees", Params, smoke=SMOKE)
def pred_equiv_trees_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Tree representations, missingness, importance and acquisition cost on every dataset and seed."""
    started = time.perf_counter()
    prepare_data(params, ctx.seeds[0], str(ctx.data_dir))
    units = [(d, s) for s in ctx.seeds for d in params.datasets]
    results = run_mapped(method.run_unit, {"dataset": [d for d, _ in units], "seed": [s for _, s in units]}, p=params)
    units_s = time.perf_counter() - started

    missing = pd.DataFrame([{"dataset": r["dataset"], "seed": r["seed"], **row} for r in results for row in r["missing_rows"]])
    importance = pd.DataFrame([{"dataset": r["dataset"], "seed": r["seed"], "measure": m, "feature": j,
                                "all_trees": v["all_trees"][j], "per_class": v["per_class"][j]}
                               for r in results for m, v in r["importance"].items() for j in range(len(v["all_trees"]))])
    return {"units": pd.DataFrame([_flatten(r) for r in results]), "missing": missing, "importance": importance,
            "timing": pd.DataFrame([{"seed": ctx.seeds[0], "units_s": units_s}])}


def _flatten(r: dict) -> dict:
    out = {"dataset": r["dataset"], "seed": r["seed"], "n_binary": r["n_binary"]}
    for group in ("cart", "faithful", "rashomon", "cost", "timings"):
        for k, v in r[group].items():
            out[f"{group}_{k}"] = v
    for m, v in r["importance"].items():
        for k in ("kendall_tau", "top_feature_changed", "max_within_class_spread"):
            out[f"vi_{m}_{k}"] = v[k]
    return out
