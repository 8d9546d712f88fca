"""f-divergence losses, the experiment: the bisection f-softargmax against softmax / entmax15 / sparsemax, then
the alpha = 1.5 f-loss against cross-entropy on digits classification, a char-level LM and LM distillation.

Records: ``accuracy`` (one row per seed, task and loss), ``exact`` (one row per seed and operator check: the max
abs error), ``checks`` (one row per seed: the SLSQP optimality gap and KL f-loss against cross-entropy) and
``lm_curve`` (one row per seed, loss and checkpoint of the char-LM). Scored by ``evaluate.py`` against the claims
in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.fdiv_losses import method
from flows.fdiv_losses.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: a seed draws its own split, score vectors, initialisation and batches; the corpus is fixed.
@paper_experiment("fdiv_losses", Params, smoke=SMOKE, seed_separable=True)
def fdiv_losses_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """The bisection's exactness, and the alpha = 1.5 f-loss against cross-entropy on three tasks."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for s in per_seed for r in s["rows"]])
    save_parquet(rows, ctx.data_dir / "accuracy_per_seed.parquet")
    (ctx.data_dir / "corpus.txt").write_text(method.corpus_text(), encoding="utf-8")
    steps = method.lm_checkpoints(params.lm_steps)
    return {
        "accuracy": rows,
        "exact": pd.DataFrame([{"seed": s["seed"], "check": check, "error": error}
                               for s in per_seed for check, error in s["exact"].items()]),
        "checks": pd.DataFrame([{"seed": s["seed"], "optimality_gap": s["optimality_gap"], "kl_vs_ce": s["kl_vs_ce"]}
                                for s in per_seed]),
        "lm_curve": pd.DataFrame([{"seed": s["seed"], "loss": loss, "step": step, "accuracy": accuracy}
                                  for s in per_seed for loss, curve in s["lm_curve"].items()
                                  for step, accuracy in zip(steps, curve)]),
    }
