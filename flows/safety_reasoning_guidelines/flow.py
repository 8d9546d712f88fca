"""Safety reasoning with guidelines, the experiment: per seed, SmolLM2-135M-Instruct LoRA fine-tuned by refusal
training (RT), by reasoning with guidelines (SRG) and by their controls on the seed's training tasks; greedy and
Best-of-N attack success on held-out tasks under four held-out attack styles.

Records: ``evaluation`` (one row per seed, arm, probe set, decoding and N), ``losses`` (per seed and arm) and
``knowledge`` (per seed: the untuned model's direct harm judgements on the held-out tasks). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.safety_reasoning_guidelines import method
from flows.safety_reasoning_guidelines.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment


# Seed-separable: the task split, the LoRA init and data order, and the samples come from the seed alone; the
# base model's answers and harm judgements are computed once (they depend on no seed) and cached in data/.
@paper_experiment("safety_reasoning_guidelines", Params, smoke=SMOKE, seed_separable=True)
def safety_reasoning_guidelines_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """RT against SRG and its controls, each a LoRA fine-tune of the same base model per seed, under attack."""
    base = method.seed_independent(params, str(ctx.data_dir))
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, base=base)
    return {"evaluation": pd.DataFrame([r for s in per_seed for r in s["rows"]]),
            "losses": pd.DataFrame([r for s in per_seed for r in s["losses"]]),
            "knowledge": pd.DataFrame([s["knowledge"] for s in per_seed])}
