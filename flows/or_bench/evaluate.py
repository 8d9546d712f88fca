"""OR-Bench, the evaluation: per retained-harm share, moderator-ensemble precision against single moderators,
hard-subset and toxic-set statistics of the refusal models over seeds; the worst setting for the claims."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from flows.or_bench.params import Params
from tasks import estimates as est
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    splits, moderators, models = records["splits"], records["moderators"], records["models"]
    settings = {f"retained{share:g}": _setting_metrics(splits, moderators, models, share)
                for share in params.retained_harm_share}
    metrics = {"settings": settings, "claims": _claims(settings), "pool_size": int(records["pool"]["prompts"].iloc[0])}
    central = params.retained_harm_share[len(params.retained_harm_share) // 2]
    mean_models = models[models["retained_share"] == central].groupby(["family", "threshold"], as_index=False)[["hard", "random", "toxic"]].mean()
    plot = pd.DataFrame({"x": mean_models["hard"], "y": mean_models["toxic"],
                         "series": mean_models["family"] + "@" + mean_models["threshold"].astype(str)})
    return RunOutput(metrics=metrics, tables={"plot": plot, "models": models}, figure=_figure(mean_models, central),
                     setup=_setup(params, metrics), notes=_measured(metrics))


def _worst(settings: dict, name: str, low: bool) -> tuple[str, dict]:
    key = (min if low else max)(settings, key=lambda k: settings[k][name]["ci_low" if low else "ci_high"])
    return key, {**settings[key][name], "setting": key}


def _setting_metrics(splits: pd.DataFrame, moderators: pd.DataFrame, models: pd.DataFrame, share: float) -> dict:
    """Over seeds, at one retained-harm share: ensemble and control precision against the best single moderator,
    pipeline sizes, the hard-subset tests and the keyword checker's agreement."""
    col = lambda name: est.per_seed(splits, name, retained_share=share)                      # noqa: E731
    singles = moderators[moderators["retained_share"] == share]
    names = list(dict.fromkeys(singles["moderator"]))
    best_single = singles.groupby("seed", sort=True)["precision"].max().to_numpy()
    per_seed_models = models[models["retained_share"] == share].groupby("seed", sort=True)
    hard_counts = [int(g["hard_over_random"].sum()) for _, g in per_seed_models]
    random_counts = [int(g["random_hard_over_random"].sum()) for _, g in per_seed_models]
    spearman = [float(sps.spearmanr(g["toxic"].tolist(), g["hard"].tolist()).statistic) for _, g in per_seed_models]
    return {
        "ensemble_precision": stats.summarize(col("ensemble_precision")),
        "control_precision": stats.summarize(col("control_precision")),
        "single_precision": {name: stats.summarize(est.per_seed(singles, "precision", moderator=name)) for name in names},
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


def _measured(m: dict) -> str:
    """The measured numbers per setting, for the notes (how to read the keyword checker is in NOTES.md)."""
    lines = []
    for k, s in m["settings"].items():
        singles = ", ".join(f"{n} {v['mean']:.3f}" for n, v in s["single_precision"].items())
        lines.append(f"**Measured**, {k}: candidates {s['sizes']['candidates']:.0f} (benign share {s['candidate_benign_share']:.3f}), "
                     f"kept {s['sizes']['kept']:.0f}, hard {s['sizes']['hard']:.0f}, toxic set {s['sizes']['toxic_set']:.0f}; "
                     f"precision ensemble {s['ensemble_precision']['mean']:.3f} vs single moderators {singles}; permuted-label "
                     f"ensemble {s['control_precision']['mean']:.3f}; models significantly harder on 'hard' per seed "
                     f"{s['hard_models_per_seed']} (random 'hard' subset {s['random_hard_models_per_seed']}); Spearman per "
                     f"seed {[round(x, 3) for x in s['spearman_per_seed']]}; keyword checker vs judge kappa "
                     f"{s['keyword_vs_judge_kappa']['mean']:.3f} (agreement {s['keyword_vs_judge_agreement']:.3f}).")
    return "\n\n".join(lines)
