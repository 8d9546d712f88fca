"""CoSER, the experiment: per seed a fresh invented world, tiny persona GPTs trained on authentic (trait-conditioned,
with inner thoughts), inauthentic (trait-ignoring) and no-thoughts dialogues, and the given-circumstance acting
(GCA) evaluation of each (plus the authentic model given permuted profiles, the negative control).

Records: ``runs`` (one row per seed and model: BLEU / ROUGE-L against the original scenes, trait-judge fidelity,
anthropomorphism, storyline consistency, LifeChoice analog, invalid NSP outputs, rounds; the ``ground_truth`` row
holds the judge's fidelity on the held-out books' own utterances). Scored by ``evaluate.py`` against the claims in
``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.coser_gca import method
from flows.coser_gca.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: each seed draws its own world, trains its own models and judge, and evaluates on its own books.
@paper_experiment("coser_gca", Params, smoke=SMOKE, seed_separable=True)
def coser_gca_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """GCA training and evaluation of persona models on authentic vs inauthentic vs no-thoughts data."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, data_dir=str(ctx.data_dir), smoke=ctx.smoke)
    rows = pd.DataFrame([r for seed_rows in per_seed for r in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    return {"runs": rows}
