"""OR-Bench, the experiment: the generate -> rewrite -> ensemble-moderate -> hard-subset -> refusal-check pipeline
on templated prompts, with real language models under test (SmolLM2-135M-Instruct and Gemma-3-270M base, each with
and without a safety instruction).

Records: ``splits`` (one row per seed and swept retained-harm share: pipeline sizes, moderator-ensemble and control
precision), ``moderators`` (one row per split and single moderator: its precision), ``configs`` (one row per split
and configuration under test: its refusal rates and hard-vs-random tests), ``facts`` (one row per configuration and
benign factual question: answered, refused; the capability gate) and ``pool`` (the prompt pool's size). Scored by
``evaluate.py`` against the claims in ``claims.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.or_bench import method
from flows.or_bench.params import SMOKE, Params
from paperflows.core.contract import RunContext
from paperflows.core.experiment import paper_experiment, run_mapped, run_task
from tasks.data import save_parquet

MODELS = tuple(dict.fromkeys(c.model for c in method.CONFIGS))


def embed_pool(pool: method.Pool):
    from tasks.embed import minilm_embed

    return minilm_embed(pool.texts)


def cached_replies(model: str, requests: list[tuple[list[str], int]], batch_size: int,
                   data_dir: Path) -> list[dict[str, list[str]]]:
    """``method.replies_of``, read from ``data_dir`` when an earlier run asked exactly the same
    (``method.request_key``; greedy replies are the same for every seed), else generated and stored there."""
    path = data_dir / f"replies_{model}_{method.request_key(model, requests, batch_size)}.parquet"
    if path.exists():
        table = pd.read_parquet(path)
        return [{c: part[c].tolist() for c in table.columns if c not in ("request", "question")}
                for _, part in table.groupby("request", sort=True)]
    answered = method.replies_of(model, requests, batch_size)
    save_parquet(pd.concat([pd.DataFrame({"request": i, "question": questions, **replies})
                            for i, ((questions, _), replies) in enumerate(zip(requests, answered))]), path)
    return answered


SPLIT_FIELDS = ("candidates", "kept", "toxic_set", "random_sample", "ensemble_precision", "control_precision",
                "candidate_benign_share")


# Not seed-separable: one prompt pool is generated (with the run's first seed), embedded and answered for all seeds;
# the seeds vary the moderator/benchmark split, the rewrites sampled and the random samples.
@paper_experiment("or_bench", Params, smoke=SMOKE)
def or_bench_experiment(params: Params, ctx: RunContext) -> dict[str, pd.DataFrame]:
    """The OR-Bench pipeline per (seed, retained-harm share) on one shared, answered prompt pool."""
    pool = method.generate_pool(params.seeds_per_category, ctx.seeds[0], params.categories)
    facts = [q for q, _ in method.FACTS]
    with threadpool_limits(limits=1):  # one BLAS thread per task: the models, then the (seed, setting) tasks
        # each model answers the pool (short replies: the checkers read the opening) and the factual questions
        answered = run_mapped(cached_replies, {"model": MODELS}, batch_size=params.batch_size, data_dir=ctx.data_dir,
                              requests=[(pool.texts, params.max_new_tokens), (facts, params.fact_tokens)])
        pool_replies = {name: r for by_request in answered for name, r in by_request[0].items()}
        fact_replies = {name: r for by_request in answered for name, r in by_request[1].items()}
        refused = {name: np.array([method.is_refusal(r) for r in rs]) for name, rs in pool_replies.items()}
        embeddings = run_task(embed_pool, pool=pool)
        grid = [(seed, share) for seed in ctx.seeds for share in params.retained_harm_share]
        runs = run_mapped(method.run_split, {"seed": [g[0] for g in grid], "retained_share": [g[1] for g in grid]},
                          p=params, pool=pool, embeddings=embeddings, refused=refused)
    save_parquet(pd.DataFrame({"prompt": pool.texts, "toxic": pool.toxic, "group": pool.group,
                               "category": [method.CATEGORIES[c] for c in pool.category],
                               "kind": ["toxic_seed" if k < 0 else method.REWRITES[k][0] for k in pool.kind],
                               **{f"reply {name}": rs for name, rs in pool_replies.items()}}),
                 ctx.data_dir / "prompt_pool.parquet")
    splits = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], **{k: r[k] for k in SPLIT_FIELDS}}
                           for r in runs])
    moderators = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], "moderator": name,
                                "precision": precision} for r in runs for name, precision in r["single_precision"].items()])
    configs = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], **c} for r in runs for c in r["configs"]])
    fact_rows = pd.DataFrame([{"seed": ctx.seeds[0], "config": name, "question": q, "answered": method.answers_fact(reply, answer),
                               "refused": method.is_refusal(reply), "reply": reply}
                              for name, replies in fact_replies.items() for (q, answer), reply in zip(method.FACTS, replies)])
    return {"splits": splits, "moderators": moderators, "configs": configs, "facts": fact_rows,
            "pool": pd.DataFrame([{"seed": ctx.seeds[0], "prompts": len(pool.texts)}])}
