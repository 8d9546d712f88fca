"""AutoAdvExBench, the experiment: the official four gated tasks and checks on a two-tier zoo of digit-scale
defences, attacked by scripted agents of graded skill in place of LLMs, plus the best-of ensembles.

Records: ``attempts`` (one row per seed, tier, defence and agent: clean and robust accuracy scored by forward.py,
whether it counts as attacked, the gated tasks passed). Scored by ``evaluate.py`` against the claims in
``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.autoadvexbench import method
from flows.autoadvexbench.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


# Seed-separable: the zoo is retrained and every agent attacks at each seed; the ensembles combine one seed's
# attempts per defence.
@paper_experiment("autoadvexbench", Params, smoke=SMOKE, seed_separable=True)
def autoadvexbench_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every agent against every defence of both tiers, per seed, and the best-of ensembles."""
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = [r for seed_rows in per_seed for r in seed_rows]
    rows += method.best_of(rows, method.LADDER, method.ENSEMBLE, params)
    rows += method.best_of(rows, ("A0", "A0_reseeded"), method.A0_TWICE, params)
    frame = pd.DataFrame(rows)
    save_parquet(frame, ctx.data_dir / "attempts.parquet")
    return {"attempts": frame}
