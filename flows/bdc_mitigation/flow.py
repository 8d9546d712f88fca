"""BDC mitigation assessment, the experiment: per seed, a four-choice benchmark drawn from real facts, word
categories and one-digit sums, updated by every rule-based mitigation strategy; SmolLM2-135M-Instruct scores it
clean, contaminated by LoRA on the original benchmark (mild, intensive) and after a placebo fine-tune on held-out
items, and each model's evaluation vectors on the original and updated benchmarks give fidelity and resistance.

Records: ``scores`` (one row per seed, recipe, strategy and benchmark family, "all" for the whole benchmark),
``training`` (one row per seed and fine-tune: steps, first and last loss) and ``examples`` (each seed's first and
last item as each strategy updates them). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.bdc_mitigation import method
from flows.bdc_mitigation.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


def _examples(params: Params, seed: int) -> list[dict]:
    updated = method.make_benchmark(params, seed).updated
    return [{"seed": seed, "strategy": s, "question": it.question, "options": " | ".join(it.options),
             "answer": it.options[it.answer]} for s in updated for it in (updated[s][0], updated[s][-1])]


# Seed-separable: each seed draws its own benchmark, LoRA init and data order, and loads its own model.
@paper_experiment("bdc_mitigation", Params, smoke=SMOKE, seed_separable=True)
def bdc_mitigation_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Fidelity and contamination resistance of every mitigation strategy, clean against contaminated LM."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([row for seed in per_seed for row in seed["scores"]])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"scores": rows, "training": pd.DataFrame([row for seed in per_seed for row in seed["training"]]),
            "examples": pd.DataFrame([row for seed in ctx.seeds for row in _examples(params, seed)])}
