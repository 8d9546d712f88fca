"""Safety reasoning with guidelines, the experiment: per seed, one small GPT pretrained on a token world with
planted safety knowledge, fine-tuned by refusal training (RT), by reasoning supervision synthesised from
guidelines (SRG) and by their controls; greedy and Best-of-N attack success on held-out attack templates.

Records: ``evaluation`` (one row per seed, variant, probe set, decoding and N) and ``recall`` (one row per seed and
model: the planted knowledge it recalls). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.safety_reasoning_guidelines import method
from flows.safety_reasoning_guidelines.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import over_seeds, paper_experiment


# Seed-separable: the world, the corpus, the pretrained and fine-tuned weights and the samples all come from the
# seed alone.
@paper_experiment("safety_reasoning_guidelines", Params, smoke=SMOKE, seed_separable=True)
def safety_reasoning_guidelines_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """RT against SRG and its controls, fine-tuned from the same pretrained model per seed, under attack."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir))
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    recall = pd.DataFrame([{"seed": s["seed"], "model": m, **v} for s in per_seed for m, v in s["recall"].items()])
    save_parquet(rows, ctx.data_dir / "evaluation.parquet")
    return {"evaluation": rows, "recall": recall}
