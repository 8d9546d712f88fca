"""CASE-Bench, the experiment: one templated Contextual-Integrity benchmark per run, annotated by a simulated panel
whose annotator count comes from a power analysis, at every (seed, point of the knob sweep); MiniLM judges scored
with the official metric suite against each panel's labels.

Records: ``runs`` (one row per seed and setting: the chosen annotator count, the pilot's safe rates, the per-item
rejections of the context z-test at that count, with 3 annotators and under the planted null, the pooled z-test,
the common design's agreement), ``judges`` (one row per seed, setting and judge: its compute_score.py metrics),
``benchmark`` (the benchmark's size and first queries) and, with ``casebench_json`` set, ``real_data`` (the pooled
z-test on the real annotations). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.case_bench import method
from flows.case_bench.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task
from tasks.data import save_parquet


# Not seed-separable: the benchmark (queries, contexts, judge training set) is drawn once, from the first seed of
# the run, and every seed's panel annotates it.
@paper_experiment("case_bench", Params, smoke=SMOKE)
def case_bench_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """A power-analysed simulated annotator panel and MiniLM judges at every point of the panel's knob sweep."""
    settings = [(b, c) for b in params.annotator_bias_sd for c in params.context_effect]
    central = settings[len(settings) // 2]
    with threadpool_limits(limits=1):  # one BLAS thread per task: the (seed, setting) tasks are the parallelism
        benchmark = run_task(method.make_benchmark, p=params, seed=ctx.seeds[0])
        grid = [(seed, b, c) for seed in ctx.seeds for b, c in settings]
        runs = run_mapped(method.run_setting, {"seed": [g[0] for g in grid], "bias_sd": [g[1] for g in grid],
                                               "context_effect": [g[2] for g in grid],
                                               "ablations": [(g[1], g[2]) == central for g in grid]},
                          p=params, benchmark=benchmark)
    # the benchmark with each seed's central-setting panel safe rates, like the official CASEBench_data.json
    table = method.benchmark_table(benchmark)
    for r in runs:
        if r["bench_safe_rate"] is not None:
            table[f"safe_rate_seed{r['seed']}"] = r["bench_safe_rate"]
    save_parquet(table, ctx.data_dir / "benchmark.parquet")

    records = {
        "runs": pd.DataFrame([{k: v for k, v in r.items() if k not in ("judges", "bench_safe_rate")} for r in runs]),
        "judges": pd.DataFrame([{"seed": r["seed"], "bias_sd": r["bias_sd"], "context_effect": r["context_effect"],
                                 "judge": judge, **scores} for r in runs for judge, scores in r["judges"].items()]),
        # one benchmark per run, drawn from its first seed
        "benchmark": pd.DataFrame([{"seed": ctx.seeds[0], "queries": len(benchmark.bench.texts),
                                    "items": 2 * len(benchmark.bench.texts),
                                    "judge_training_items": 2 * len(benchmark.train.texts),
                                    "example_queries": benchmark.bench.texts[:3]}]),
    }
    if params.casebench_json:  # the real annotations do not depend on a seed: filed under the run's first seed
        real = method.real_context_test(method.load_casebench(Path(params.casebench_json)))
        records["real_data"] = pd.DataFrame([{"seed": ctx.seeds[0], **real}])
    return records
