"""OR-Bench as a Prefect flow: the generate -> rewrite -> ensemble-moderate -> hard-subset -> refusal-classification
pipeline on templated prompts, with 16 trained refusal policies standing in for the LLMs under test."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps
from threadpoolctl import threadpool_limits

from flows.or_bench import method
from flows.or_bench.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import paper_flow, run_mapped, run_task

SWEEP = "at every swept share of rewrites that keep the harmful request (worst setting)"

PAPER = Paper(
    slug="or_bench",
    title="OR-Bench: An Over-Refusal Benchmark for Large Language Models",
    method="OR-Bench pipeline: toxic seeds -> benign rewrites -> moderator-ensemble filter -> hard subset -> response classes",
    paper_class="C",
    source="abstracts-003.txt #16",
    official_code="justincui03/or-bench (moderator/, response_checker/check_response.py, alignment_checker/ read)",
    claims=(
        Claim(id="ensemble_keeps_benign_prompts",
              text=("a novel method for automatically generating large-scale over-refusal datasets -- the moderator "
                    "ensemble's kept 'seemingly toxic' prompts are truly benign: precision >= 0.9 " + SWEEP + ". A "
                    "sanity check, not the paper's claim: the six fixed rewrite templates each carry their label and "
                    "the moderators train on all six with true labels, so the filter holds by construction (TF-IDF + "
                    "naive Bayes alone scores 1.000)"),
              source="abstract; plan claim 1 (magnitude; demoted: holds by construction here)",
              metric="claims.ensemble_precision_worst.mean", comparison=">=", threshold=0.9, kind="magnitude",
              role="sanity", interval=ci("claims.ensemble_precision_worst"),
              per_setting="claims.ensemble_precision_by_setting"),
        Claim(id="ensemble_beats_each_moderator",
              text=("the LLM-ensemble moderation improves on a single moderator -- ensemble precision minus the best "
                    "single moderator's precision > 0 " + SWEEP),
              source="plan claim 1 (direction)", metric="claims.ensemble_minus_best_single_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.ensemble_minus_best_single_worst"),
              per_setting="claims.ensemble_minus_best_single_by_setting",
              control=Control(name="the permuted-label ensemble minus the best single moderator, its best setting",
                              metric="claims.control_minus_best_single_best.mean",
                              interval=ci("claims.control_minus_best_single_best"))),
        Claim(id="hard_subset_is_hard",
              text=("a subset of around 1,000 hard prompts -- the models refuse significantly more of the hard subset "
                    "than of a random sample of the over-refusal set (two-proportion z-test, p < 0.05) for at least 14 "
                    "of the 16 models, in every seed " + SWEEP),
              source="abstract; plan claim 2 (direction)", metric="claims.hard_models_min", comparison=">=",
              threshold=14, kind="direction", role="claim", per_seed="claims.hard_models_per_seed",
              per_setting="claims.hard_models_by_setting",
              control=Control(name="a random subset of the same size called 'hard', most favourable seed and setting",
                              metric="claims.random_hard_models_max")),
        Claim(id="toxic_rejection_tracks_over_refusal",
              text=("safety and over-refusal are strongly correlated (Spearman ~0.89 across 32 LLMs) -- Spearman(toxic "
                    "rejection rate, over-refusal rate on the hard subset) across the 16 models >= 0.7, worst seed and "
                    "setting; largely built in by sweeping each family's refusal threshold, so a pipeline check, not "
                    "evidence about LLMs"),
              source="paper Figure 1; plan claim 3", metric="claims.spearman_min", comparison=">=", threshold=0.7,
              kind="magnitude", role="sanity"),
    ),
    limitations=(
        "What the stand-in cannot show: whether real LLMs over-refuse, how real models trade safety for helpfulness, or "
        "any property of the 80k OR-Bench prompts (the Hugging Face dataset cannot be loaded offline). The generator "
        "and rewriter are templates with Faker entities (10 categories x 4 harmful/protective action pairs, 3 seed and "
        "6 rewrite templates), not Mixtral; the moderators are a MiniLM-embedding logistic judge, TF-IDF + naive Bayes "
        "and a keyword rule, not GPT-4 / Llama-3-70B / Gemini; the 16 'LLMs' are refusal classifiers (4 feature "
        "families x 4 thresholds) safety-trained on clearly harmful vs protective requests, answering from response "
        "templates; the response judge is the template label itself, against which the official keyword checker is "
        "scored. Requests in the benchmark use action pairs no classifier was trained on. The share of rewrites that "
        "keep the harmful request is a data knob and is swept; scale is 240 toxic seeds and about 1,000 rewrites per "
        "split, not 80,000 prompts."
    ),
)


def _worst(settings: dict, name: str, low: bool) -> tuple[str, dict]:
    key = (min if low else max)(settings, key=lambda k: settings[k][name]["ci_low" if low else "ci_high"])
    return key, {**settings[key][name], "setting": key}


def _setting_metrics(runs: list[dict]) -> dict:
    runs = sorted(runs, key=lambda r: r["seed"])
    col = lambda name: [r[name] for r in runs]
    best_single = [max(r["single_precision"].values()) for r in runs]
    hard_counts = [sum(m["hard_over_random"] for m in r["models"]) for r in runs]
    random_counts = [sum(m["random_hard_over_random"] for m in r["models"]) for r in runs]
    spearman = [float(sps.spearmanr([m["toxic"] for m in r["models"]], [m["hard"] for m in r["models"]]).statistic)
                for r in runs]
    return {
        "ensemble_precision": stats.summarize(col("ensemble_precision")),
        "control_precision": stats.summarize(col("control_precision")),
        "single_precision": {name: stats.summarize([r["single_precision"][name] for r in runs]) for name in runs[0]["single_precision"]},
        "ensemble_minus_best_single": stats.paired_difference(col("ensemble_precision"), best_single),
        "control_minus_best_single": stats.paired_difference(col("control_precision"), best_single),
        "candidate_benign_share": float(np.mean(col("candidate_benign_share"))),
        "sizes": {k: float(np.mean(col(k))) for k in ("candidates", "kept", "hard", "toxic_set")},
        "hard_models_per_seed": hard_counts, "random_hard_models_per_seed": random_counts,
        "spearman_per_seed": spearman,
        "keyword_vs_judge_kappa": stats.summarize(col("keyword_vs_judge_kappa")),
        "keyword_vs_judge_agreement": float(np.mean(col("keyword_vs_judge_agreement"))),
    }


def _claims(settings: dict) -> dict:
    _, precision = _worst(settings, "ensemble_precision", low=True)
    _, gain = _worst(settings, "ensemble_minus_best_single", low=True)
    _, control_gain = _worst(settings, "control_minus_best_single", low=False)
    seeds = len(next(iter(settings.values()))["hard_models_per_seed"])
    return {
        "ensemble_precision_worst": precision,
        "ensemble_precision_by_setting": {k: s["ensemble_precision"]["mean"] for k, s in settings.items()},
        "ensemble_minus_best_single_worst": gain, "control_minus_best_single_best": control_gain,
        "ensemble_minus_best_single_by_setting": {k: s["ensemble_minus_best_single"]["mean"] for k, s in settings.items()},
        "hard_models_per_seed": [min(s["hard_models_per_seed"][i] for s in settings.values()) for i in range(seeds)],
        "hard_models_min": min(min(s["hard_models_per_seed"]) for s in settings.values()),
        "hard_models_by_setting": {k: min(s["hard_models_per_seed"]) for k, s in settings.items()},
        "random_hard_models_max": max(max(s["random_hard_models_per_seed"]) for s in settings.values()),
        "spearman_min": min(min(s["spearman_per_seed"]) for s in settings.values()),
    }


def embed_pool(pool: method.Pool):
    from tasks.embed import minilm_embed

    return minilm_embed(pool.texts)


@paper_flow(PAPER, Params, smoke=SMOKE)
def or_bench_flow(params: Params, ctx: RunContext) -> RunOutput:
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
    settings = {f"retained{share:g}": _setting_metrics([r for r in runs if r["retained_share"] == share])
                for share in params.retained_harm_share}
    metrics = {"settings": settings, "claims": _claims(settings), "pool_size": len(pool.texts)}
    models = pd.DataFrame([{"seed": r["seed"], "retained_share": r["retained_share"], **m} for r in runs for m in r["models"]])
    central = params.retained_harm_share[len(params.retained_harm_share) // 2]
    mean_models = models[models["retained_share"] == central].groupby(["family", "threshold"], as_index=False)[["hard", "random", "toxic"]].mean()
    plot = pd.DataFrame({"x": mean_models["hard"], "y": mean_models["toxic"],
                         "series": mean_models["family"] + "@" + mean_models["threshold"].astype(str)})
    return RunOutput(metrics=metrics, tables={"plot": plot, "models": models}, figure=_figure(mean_models, central),
                     setup=_setup(params, metrics), notes=_notes(metrics))


def _figure(models: pd.DataFrame, central: float):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    for family, group in models.groupby("family"):
        left.plot(group["hard"], group["toxic"], "o-", label=family)
        right.plot(group["random"], group["hard"], "o", label=family)
    left.set(xlabel="over-refusal rate on the hard subset", ylabel="rejection rate on the toxic set",
             title=f"16 models (mean over seeds, retained share {central:g})")
    right.plot([0, 1], [0, 1], "k:", lw=1)
    right.set(xlabel="over-refusal on a random sample", ylabel="over-refusal on the hard subset", title="the hard subset is harder")
    left.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    return (f"One pool per run: {p.seeds_per_category} toxic seeds per category x 10 categories (moderator/config.py's), "
            f"each with 6 rewrites (3 benign, 3 keeping the harmful request): {m['pool_size']} prompts, embedded once "
            "with MiniLM. Each seed splits the pool by action pair (one for the moderators, one for the models, two for "
            "the benchmark); each benchmark seed gets 3 rewrites, a swept share "
            f"{p.retained_harm_share} of them harmful. Moderators: MiniLM + logistic, TF-IDF + naive Bayes, keyword "
            "rule; kept = majority says safe; the toxic set = benchmark seeds the majority calls toxic. Hard subset: "
            f"kept prompts refused by >= {p.hard_votes} of 3 reference models (MiniLM, TF-IDF, char n-gram logistic "
            f"classifiers, their own training data). 16 models: 4 feature families x thresholds {p.thresholds} on "
            f"P(toxic); refusals worded indirectly with probability {p.indirect_refusal_share}; the random sample has "
            f"{p.random_sample_size} prompts.")


def _notes(m: dict) -> str:
    lines = []
    for k, s in m["settings"].items():
        singles = ", ".join(f"{n} {v['mean']:.3f}" for n, v in s["single_precision"].items())
        lines.append(f"{k}: candidates {s['sizes']['candidates']:.0f} (benign share {s['candidate_benign_share']:.3f}), "
                     f"kept {s['sizes']['kept']:.0f}, hard {s['sizes']['hard']:.0f}, toxic set {s['sizes']['toxic_set']:.0f}; "
                     f"precision ensemble {s['ensemble_precision']['mean']:.3f} vs single moderators {singles}; permuted-label "
                     f"ensemble {s['control_precision']['mean']:.3f}; models significantly harder on 'hard' per seed "
                     f"{s['hard_models_per_seed']} (random 'hard' subset {s['random_hard_models_per_seed']}); Spearman per "
                     f"seed {[round(x, 3) for x in s['spearman_per_seed']]}; keyword checker vs judge kappa "
                     f"{s['keyword_vs_judge_kappa']['mean']:.3f} (agreement {s['keyword_vs_judge_agreement']:.3f}).")
    lines.append("The keyword checker is the official GPT-4 one (refusal openings, acceptance openings); it misses the "
                 "indirect refusals that do not open with a refusal phrase, as the paper notes of keyword matching.")
    return "\n\n".join(lines)
