"""Forest of Thought, the experiment: CoT, ToT and FoT forests (sparse and dense) with and without
self-correction, and the final-decision rules, on three-number target puzzles with SmolLM2-135M-Instruct as
proposer, evaluator and expert.

Records: ``puzzles`` (one row per seed, correction and puzzle: success and calls of every method), ``rules``
(ToT with an error-free proposer, the control of the correction claim) and ``gates`` (the capability gates and
the proposer's valid-step share, one row per seed). Scored by ``evaluate.py`` against ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.forest_of_thought import method
from flows.forest_of_thought.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment
from tasks.data import save_parquet


@paper_experiment("forest_of_thought", Params, smoke=SMOKE, seed_separable=True)
def forest_of_thought_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """CoT, ToT and FoT with self-correction and CGED on three-number puzzles with SmolLM2-135M-Instruct."""
    results = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([r for res in results for r in res["rows"]])
    save_parquet(rows, ctx.data_dir / "per_puzzle.parquet")
    return {"puzzles": rows,
            "rules": pd.DataFrame([r for res in results for r in res["rules_rows"]]),
            "gates": pd.DataFrame([{"seed": res["seed"], **res["gates"]} for res in results])}
