"""dynsel_aug, the experiment: joint dynamic data selection (local density x multimodal consistency) and
augmentation against full data, random dynamic selection, InfoBatch, augmentation only and ablations, all at an
exact, counted per-epoch budget, on digits with 0% and 20% label noise.

Records: ``per_seed`` (one row per seed, noise setting and method: test accuracy, budget counts, noisy share,
zero-shot accuracy of the CLIP stand-in, CPU time). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.dynsel_aug import method
from flows.dynsel_aug.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped
from tasks.data import save_parquet
from tasks.embed import minilm_embed


# Seed-separable: every seed draws its own split and noise; the prompt embeddings are the same for every seed.
@paper_experiment("dynsel_aug", Params, smoke=SMOKE, seed_separable=True)
def dynsel_aug_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every method at the same per-epoch budget on digits, clean and with label noise, for every seed."""
    text = minilm_embed(method.class_prompts(params))   # the 10 prompt embeddings, once per run
    settings = [(seed, noise) for seed in ctx.seeds for noise in (0.0, params.noise_rate)]
    per_setting = run_mapped(method.run_setting, {"seed": [s for s, _ in settings], "noise": [z for _, z in settings]},
                             p=params, text=text)
    rows = pd.DataFrame([r for block in per_setting for r in block])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"per_seed": rows}
