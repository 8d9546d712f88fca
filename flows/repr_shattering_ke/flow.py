"""Representation shattering in knowledge editing, the experiment: per seed a knowledge graph on cyclic
orders, a small GPT trained on it, ROME edits at every ring distance next to random rank-one updates of the
same norm, and the representations and accuracies before and after.

Records: ``edits`` (one row per seed and edit), ``models`` (the unedited model's accuracies, one row per
seed) and ``representations`` (one row per seed and entity: ring positions, representation before and after
the seed's first farthest edit). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.repr_shattering_ke import method
from flows.repr_shattering_ke.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import over_seeds, paper_experiment


def _representations(result: dict) -> list[dict]:
    """One row per entity: its position on every cycle, its representation unedited and after the far edit."""
    reps = result["reps"]
    far = reps["far"]["reps"] if reps["far"] is not None else [None] * len(reps["orig"])
    positions = list(zip(*reps["position"]))      # (cycles, entities) -> per entity
    return [{"seed": result["seed"], "entity": i, "position": list(pos), "orig": orig, "far": after}
            for i, (pos, orig, after) in enumerate(zip(positions, reps["orig"], far))]


# Seed-separable: each seed has its own knowledge graph, model and edits.
@paper_experiment("repr_shattering_ke", Params, smoke=SMOKE, seed_separable=True)
def repr_shattering_ke_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """ROME edits at every ring distance on a small GPT trained on a cyclic knowledge graph."""
    results = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir), smoke=ctx.smoke)
    rows = pd.DataFrame([r for res in results for r in res["rows"]])
    save_parquet(rows, ctx.data_dir / "edits.parquet")
    return {"edits": rows,
            "models": pd.DataFrame([{"seed": res["seed"], **res["model"]} for res in results]),
            "representations": pd.DataFrame([r for res in results for r in _representations(res)])}
