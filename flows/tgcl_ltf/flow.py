"""LTF on temporal graphs, the experiment: LTF (error-minimising + distribution-preserving subset selection with
an MMD regulariser) against ER-random, iCaRL, EWC and LwF at equal memory on a drifting synthetic temporal graph.

Records: ``per_seed`` (one row per seed and method) and ``probe`` (one row per seed: the frozen task-0 model's
accuracy drop on its own classes). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.tgcl_ltf import method
from flows.tgcl_ltf.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: a seed draws its own stream, trains its own task-0 model and every method from it.
@paper_experiment("tgcl_ltf", Params, smoke=SMOKE, seed_separable=True)
def tgcl_ltf_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """LTF against replay and regularisation baselines at equal memory, and the drift probe."""
    per_seed = [row for rows in over_seeds(method.run_seed, ctx.seeds, p=params) for row in rows]
    frame = pd.DataFrame(per_seed)
    probe = frame[frame["method"] == "drift_probe"][["seed", "stale_drop"]]
    rows = frame[frame["method"] != "drift_probe"].drop(columns=["stale_drop"])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"per_seed": rows, "probe": probe}
