"""Forest of Thought, the experiment: CoT, ToT and FoT forests (sparse and dense) with and without
self-correction, and the final-decision rules, on held-out Game-of-24 puzzles with a small GPT as the LLM.

Records: ``puzzles`` (one row per seed, temperature, correction and puzzle: success and calls of every
method), ``rules`` (ToT with an error-free proposer, the control of the correction claim) and ``value`` (the
value model's accuracy on held-out states, one row per seed). Scored by ``evaluate.py`` against ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.forest_of_thought import method
from flows.forest_of_thought.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import over_seeds, paper_experiment, run_task


# Not seed-separable: one model, trained on the first seed of the run, serves every seed.
@paper_experiment("forest_of_thought", Params, smoke=SMOKE)
def forest_of_thought_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """CoT, ToT and FoT with self-correction and CGED on Game of 24 with a small GPT."""
    model_seed = ctx.seeds[0]
    model_path = run_task(method.prepare_model, p=params, seed=model_seed, data_dir=str(ctx.data_dir))
    results = over_seeds(method.run_seed, ctx.seeds, p=params, model_seed=model_seed, model_path=model_path)
    rows = pd.DataFrame([r for res in results for r in res["rows"]])
    save_parquet(rows, ctx.data_dir / "per_puzzle.parquet")
    return {"puzzles": rows,
            "rules": pd.DataFrame([r for res in results for r in res["rules_rows"]]),
            "value": pd.DataFrame([{"seed": res["seed"], **res["value"]} for res in results])}
