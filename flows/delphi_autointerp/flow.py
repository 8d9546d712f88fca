"""delphi_autointerp, the experiment: Delphi's explain-and-score pipeline on a TopK SAE of SmolLM2-135M-Instruct's
residual stream, with SmolLM2 itself as explainer and scorer, MiniLM for embedding scoring, and the claims'
negative controls (random-direction latents, shuffled explanations, a second shuffle as A/A).

Records: ``latents`` (one row per seed, latent set and latent: explanation and scores) and ``facts`` (one row per
seed: SAE quality, pool sizes, the scorers' hand-made gate, CPU times). Scored by ``evaluate.py``.
"""

from __future__ import annotations

import time

import pandas as pd

from flows.delphi_autointerp import method
from flows.delphi_autointerp.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks import pretrained as P
from tasks.data import save_parquet


# Seed-separable: the activations and the hand-made gate are deterministic and seed-free (computed once, the
# activations cached in data_dir); each seed draws its own SAE, latents, random directions, splits and shuffles.
@paper_experiment("delphi_autointerp", Params, smoke=SMOKE, seed_separable=True)
def delphi_autointerp_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Delphi's scorers on SAE latents against random directions and shuffled explanations."""
    started = time.process_time()
    model, tokenizer = P.load(params.model)
    method.cached_activations(params, ctx.data_dir, model, tokenizer)
    gate = method.scorer_gate(model, tokenizer)
    del model
    shared_s = time.process_time() - started
    out = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir))
    rows = pd.DataFrame([r for o in out for r in o["rows"]])
    save_parquet(rows, ctx.data_dir / "latents.parquet")
    facts = pd.DataFrame([{**o["facts"], **gate, "shared_cpu_s": shared_s} for o in out])
    return {"latents": rows, "facts": facts}
