"""RINGS, the experiment: GIN accuracies under mode perturbations of graph-level datasets whose answer is known
by design, the KS permutation separability tests between modes, and mode complementarity on graphs whose
features are aligned with their structure by construction (plus the small real graphs networkx ships).

Records: ``accuracies`` (one row per seed, dataset, label set, mode, repeat and fold), ``separability_tests``
(one row per seed, dataset, label set and pair of modes), ``complementarity`` (one row per seed, graph, feature
kind and noise level) and ``real_graphs`` (one row per real graph and feature kind). Scored by ``evaluate.py``
against the checks in ``claims.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.rings_graph_eval import method
from flows.rings_graph_eval.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_mapped, run_task
from tasks.data import save_parquet


def separability_task(distributions: dict[str, np.ndarray], n_permutations: int, alpha: float) -> list[dict]:
    with threadpool_limits(limits=1):
        return method.separability(distributions, n_permutations, alpha)


# Not seed-separable: the real graphs' shuffles are drawn once, with the run's first seed.
@paper_experiment("rings_graph_eval", Params, smoke=SMOKE)
def rings_graph_eval_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """GIN accuracies per perturbation mode, their separability tests, and complementarity sweeps."""
    jobs = list(itertools.product(ctx.seeds, params.datasets, (False, True)))
    with threadpool_limits(limits=1):
        perf = run_mapped(method.performance_rows, {"seed": [j[0] for j in jobs], "dataset": [j[1] for j in jobs],
                                                    "permute_labels": [j[2] for j in jobs]}, p=params)
        comp = over_seeds(method.complementarity_rows, ctx.seeds, p=params)
        real = run_task(method.real_graph_rows, p=params, seed=ctx.seeds[0])
    rows = pd.DataFrame([r for part in perf for r in part])
    save_parquet(pd.DataFrame(method.dataset_table(params, ctx.seeds[0])), ctx.data_dir / "graphs_first_seed.parquet")
    save_parquet(rows, ctx.data_dir / "accuracies.parquet")
    # The KS permutation tests (deterministic given the accuracies) are records too: they run as parallel tasks,
    # too slow for the evaluation stage
    dists = method.accuracy_distributions(rows)
    keys = list(dists)
    tests = run_mapped(separability_task, {"distributions": [dists[k] for k in keys]},
                       n_permutations=params.n_permutations, alpha=params.alpha)
    pairs = pd.DataFrame([{"seed": k[0], "dataset": k[1], "labels": k[2], **t} for k, ts in zip(keys, tests) for t in ts])
    return {"accuracies": rows, "separability_tests": pairs,
            "complementarity": pd.DataFrame([r for s in comp for r in s]),
            "real_graphs": pd.DataFrame([{"seed": ctx.seeds[0], **r} for r in real])}
