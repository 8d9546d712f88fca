"""BDC mitigation assessment, the experiment: one synthetic benchmark updated by every rule-based mitigation
strategy, then per seed a clean and contaminated (mild, intensive) frozen-MiniLM scoring model and their
evaluation vectors on the original and updated benchmarks.

Records: ``scores`` (one row per seed, recipe, strategy and benchmark family, "all" for the whole benchmark),
``benchmark`` (its sizes) and ``examples`` (the first and last item as each strategy updates them); the last two
belong to the benchmark, drawn once with the run's first seed. Scored by ``evaluate.py`` against the claims in
``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.bdc_mitigation import method
from flows.bdc_mitigation.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import over_seeds, paper_experiment, run_task


# Not seed-separable: the benchmark (and its strategy updates) is drawn once, from the first seed, for all seeds.
@paper_experiment("bdc_mitigation", Params, smoke=SMOKE)
def bdc_mitigation_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Fidelity and contamination resistance of every mitigation strategy, clean against contaminated models."""
    with threadpool_limits(limits=1):  # the seeds are the parallelism
        benchmark = run_task(method.make_benchmark, p=params, seed=ctx.seeds[0])
        rows = pd.DataFrame([row for seed_rows in over_seeds(method.run_seed, ctx.seeds, p=params, benchmark=benchmark)
                             for row in seed_rows])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    sizes = pd.DataFrame([{"seed": ctx.seeds[0], "items": len(benchmark.items[method.VANILLA]),
                           "train_items": len(benchmark.items["train"]),
                           "placebo_items": len(benchmark.items["placebo"]), "distinct_texts": benchmark.n_texts}])
    # the first and the last benchmark item (first and last family) as each strategy updates them
    examples = pd.DataFrame([{"seed": ctx.seeds[0], "strategy": s, "question": it.question,
                              "options": " | ".join(it.options), "answer": it.options[it.answer]}
                             for s in method.strategy_kinds(params)
                             for it in (benchmark.items[s][0], benchmark.items[s][-1])])
    return {"scores": rows, "benchmark": sizes, "examples": examples}
