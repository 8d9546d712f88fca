"""delphi_autointerp, the experiment: Delphi's explain-and-score pipeline on a small GPT's TopK SAE, with a
SCRIPTED explainer/scorer in place of the LLMs, the real MiniLM for the embedding scorer, and the claims'
negative controls (random-direction latents, shuffled explanations, a second shuffle as A/A).

Records: ``latents`` (one row per seed, latent set and latent, every score) and ``facts`` (one row per seed:
LM and SAE quality, pool sizes, CPU times). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.delphi_autointerp import method
from flows.delphi_autointerp.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import over_seeds, paper_experiment


# Seed-separable: each seed draws its own corpus, GPT, SAE and latents; MiniLM is a fixed pretrained model.
@paper_experiment("delphi_autointerp", Params, smoke=SMOKE, seed_separable=True)
def delphi_autointerp_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Delphi's scorers on SAE latents against random directions and shuffled explanations."""
    out = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir))
    rows = pd.DataFrame([r for o in out for r in o["rows"]])
    save_parquet(rows, ctx.data_dir / "latents.parquet")
    return {"latents": rows, "facts": pd.DataFrame([o["facts"] for o in out])}
