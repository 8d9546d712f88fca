"""GIT (task trees), the experiment: per seed a synthetic world of source and held-out domains, encoders
pretrained on task trees (GIT, node-only, on noise domains) or untrained, fine-tuned and in context on the
held-out domains' node, link and graph tasks.

Records: ``runs`` (one row per seed, held-out domain, level, method and mode: query accuracy) and
``pretrain`` (one row per seed and pretrained encoder: first and last pretraining loss). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.git_task_trees import method
from flows.git_task_trees.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: every seed redraws the world, the domains, the splits and the pretraining.
@paper_experiment("git_task_trees", Params, smoke=SMOKE, seed_separable=True)
def git_task_trees_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """GIT's task-tree pretraining against node-only, noise-pretrained and untrained encoders."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    pretrain = pd.DataFrame([{"seed": s["seed"], "method": m, "loss_first": s["loss_first"][m],
                              "loss_last": s["loss_last"][m]} for s in per_seed for m in s["loss_first"]])
    return {"runs": rows, "pretrain": pretrain}
