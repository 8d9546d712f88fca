"""OR-Bench, the experiment: the generate -> rewrite -> ensemble-moderate -> hard-subset -> refusal-classification
pipeline on templated prompts, with 16 trained refusal policies standing in for the LLMs under test.

Records: ``splits`` (one row per seed and swept retained-harm share: pipeline sizes, moderator-ensemble and
control precision, keyword-checker agreement), ``moderators`` (one row per split and single moderator: its
precision), ``models`` (one row per split and refusal model: its refusal rates and hard-vs-random tests) and
``pool`` (the prompt pool's size). Scored by ``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

import pandas as pd
from threadpoolctl import threadpool_limits

from flows.or_bench import method
from flows.or_bench.params import SMOKE, Params
from tasks.contract import RunContext
from tasks.data import save_parquet
from tasks.experiment import paper_experiment, run_mapped, run_task


def embed_pool(pool: method.Pool):
    from tasks.embed import minilm_embed

    return minilm_embed(pool.texts)


SPLIT_FIELDS = ("candidates", "kept", "hard", "toxic_set", "ensemble_precision", "control_precision",
                "candidate_benign_share", "keyword_vs_judge_kappa", "keyword_vs_judge_agreement")


# Not seed-separable: one prompt pool is generated (with the run's first seed) and embedded for all seeds.
@paper_experiment("or_bench", Params, smoke=SMOKE)
def or_bench_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """The OR-Bench pipeline per (seed, retained-harm share) on one shared prompt pool."""
    pool = method.generate_pool(params.seeds_per_category, ctx.seeds[0])
    save_parquet(pd.DataFrame({"prompt": pool.texts, "toxic": pool.toxic, "group": pool.group,
                               "category": [method.CATEGORIES[c] for c in pool.category],
                               "kind": ["toxic_seed" if k < 0 else method.REWRITES[k][0] for k in pool.kind]}),
                 ctx.data_dir / "prompt_pool.parquet")
    with threadpool_limits(limits=1):  # one BLAS thread per task: the (seed, setting) tasks are the parallelism
        embeddings = run_task(embed_pool, pool=pool)
        grid = [(seed, share) for seed in ctx.seeds for share in params.retained_harm_share]
        runs = run_mapped(method.run_split, {"seed": [g[0] for g in grid], "retained_share": [g[1] for g in grid]},
                          p=params, pool=pool, embeddings=embeddings)
    splits = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], **{k: r[k] for k in SPLIT_FIELDS}}
                           for r in runs])
    moderators = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], "moderator": name,
                                "precision": precision} for r in runs for name, precision in r["single_precision"].items()])
    models = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], **m} for r in runs for m in r["models"]])
    return {"splits": splits, "moderators": moderators, "models": models,
            "pool": pd.DataFrame([{"seed": ctx.seeds[0], "prompts": len(pool.texts)}])}
