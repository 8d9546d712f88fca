"""Representation shattering in knowledge editing, the experiment: ROME edits of SmolLM2's knowledge of the months at
every ring distance, each beside a random rank-one update of the same norm, and the representations and accuracies
before and after.

Records: ``edits`` (one row per seed and edit), ``models`` (the unedited model's gate values, one row per seed;
identical across seeds, the model is fixed) and ``representations`` (one row per seed and month: its representation
unedited and after the seed's first farthest edit). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from flows.repr_shattering_ke import method
from flows.repr_shattering_ke.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks import pretrained as P


def key_moment_path(params: Params, data_dir: Path) -> Path:
    """ROME's C for the edited layer, computed once (it depends on no seed) and kept in the stage's data folder."""
    path = Path(data_dir) / f"key_moment_{params.model}_layer{params.edit_layer}_{params.cov_tokens}tok.npy"
    if not path.exists():
        model, tokenizer = P.load(params.model)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, method.key_second_moment(model, tokenizer, params.edit_layer, params.cov_tokens))
    return path


def _representations(result: dict) -> list[dict]:
    reps = result["reps"]
    far = reps["far"]["reps"] if reps["far"] is not None else [None] * len(reps["orig"])
    return [{"seed": result["seed"], "month": i, "orig": orig, "far": after}
            for i, (orig, after) in enumerate(zip(reps["orig"], far))]


# Seed-separable: a seed's edits depend on that seed alone (C and the unedited model are fixed).
@paper_experiment("repr_shattering_ke", Params, smoke=SMOKE, seed_separable=True)
def repr_shattering_ke_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """ROME edits at every ring distance of the months on a pretrained LM, with their controls."""
    cov_path = str(key_moment_path(params, ctx.data_dir))
    results = over_seeds(method.run_seed, ctx.seeds, p=params, cov_path=cov_path)
    return {"edits": pd.DataFrame([r for res in results for r in res["rows"]]),
            "models": pd.DataFrame([{"seed": res["seed"], **res["model"]} for res in results]),
            "representations": pd.DataFrame([r for res in results for r in _representations(res)])}
