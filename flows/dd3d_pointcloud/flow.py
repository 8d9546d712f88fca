"""DD3D, the experiment: point-cloud dataset distillation with a PCA + sign rotator and a point-wise generator
trained by gradient matching, against DM, random real clouds, its ablations and the full set, on procedural shapes
in random SO(3) poses.

Records: ``accuracy`` (one row per seed and arm: the test accuracy of a PointNet trained on that arm's set) and
``memory`` (one row per seed: bytes autograd saves in one matching step at either resolution). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.dd3d_pointcloud import method
from flows.dd3d_pointcloud.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


@paper_experiment("dd3d_pointcloud", Params, smoke=SMOKE, seed_separable=True)
def dd3d_pointcloud_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """DD3D, its ablations and the baselines, distilled and evaluated per seed."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([{"seed": s["seed"], "arm": a, "accuracy": v} for s in per_seed for a, v in s["acc"].items()])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    memory = pd.DataFrame([{"seed": s["seed"], "distill_res": s["bytes"]["distill_res"],
                            "eval_res": s["bytes"]["eval_res"]} for s in per_seed])
    return {"accuracy": rows, "memory": memory}
