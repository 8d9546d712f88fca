"""DyPolySeg few-shot point-cloud segmentation, the experiment: DyPolySeg, its replicate, its two ablations
and a ProtoNet-PointNet baseline trained on base-class episodes and tested on novel-class episodes of
procedural 3-D scenes.

Records: ``arms`` (one row per seed and arm: novel-class mIoU, training losses, parameter count, CPU time)
and ``per_class`` (one row per seed, arm and novel class: IoU). Scored by ``evaluate.py`` against
``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.dypolyseg_fewshot_pc import method
from flows.dypolyseg_fewshot_pc.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet


# Seed-separable: each seed draws its own class split, scenes and episodes; every arm of a seed runs on them.
@paper_experiment("dypolyseg_fewshot_pc", Params, smoke=SMOKE, seed_separable=True)
def dypolyseg_fewshot_pc_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """DyPolySeg against its ablations and ProtoNet-PointNet on 2-way 1-shot procedural scenes."""
    pairs = [(s, a) for s in ctx.seeds for a in method.ARMS]
    out = run_mapped(method.run_arm, {"seed": [s for s, _ in pairs], "arm": [a for _, a in pairs]}, p=params)
    rows = pd.DataFrame([{k: v for k, v in r.items() if k != "per_class"} for r in out])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    per_class = pd.DataFrame([{"seed": r["seed"], "arm": r["arm"], "class": c, "iou": v}
                              for r in out for c, v in r["per_class"].items()])
    return {"arms": rows, "per_class": per_class}
