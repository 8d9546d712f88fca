"""LLM-SRBench, the experiment: the benchmark construction (LSR-Transform by symbolic solving, LSR-Synth by
simulated synthetic-term ODEs, ID/OOD splits) and non-LLM searchers against a memorizer, scored by the official
metrics.

Records: ``scores`` (one row per seed, problem and method: symbolic accuracy, Acc_tau and NMSE per split) and
``solved_targets`` (one row per seed and law: the inputs sympy could solve the law for, the same for every seed).
Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd

from flows.llm_srbench import method
from flows.llm_srbench.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import over_seeds, paper_experiment, run_mapped
from tasks.data import save_parquet


# Seed-separable: the sympy solutions, computed once for all seeds, are deterministic (no draw); each seed draws
# its own benchmark and runs its own searches.
@paper_experiment("llm_srbench", Params, smoke=SMOKE, seed_separable=True)
def llm_srbench_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """Every method on every problem of every seed's benchmark."""
    laws = list(method.LAWS[:params.n_laws])
    solutions = tuple(run_mapped(method.transform_solutions, {"law": laws}))
    benchmarks = over_seeds(method.build_benchmark, ctx.seeds, p=params, solutions=solutions)
    jobs = [(seed, i, problem) for seed, problems in zip(ctx.seeds, benchmarks) for i, problem in enumerate(problems)]
    scored = run_mapped(method.run_problem, {"seed": [j[0] for j in jobs], "index": [j[1] for j in jobs],
                                             "problem": [j[2] for j in jobs]}, p=params)
    rows = pd.DataFrame([row for problem_rows in scored for row in problem_rows])
    save_parquet(rows, ctx.data_dir / "scores.parquet")
    solved = pd.DataFrame([{"seed": seed, "law": law.name, "targets": [x.name for x, sols in s if sols]}
                           for seed in ctx.seeds for law, s in zip(laws, solutions)])
    return {"scores": rows, "solved_targets": solved}
