"""OR-Bench, the evaluation: per retained-harm share, moderator-ensemble precision against single moderators, and
the real models' refusal rates on the hard subset, a random sample and the toxic set over seeds; the worst setting
for the claims; the capability gate from the benign factual questions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from flows.or_bench.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    splits, moderators, configs, facts = records["splits"], records["moderators"], records["configs"], records["facts"]
    by_config = facts.groupby("config", sort=False)
    gate = {name: {"accuracy": float(g["answered"].mean()), "refused": float(g["refused"].mean())}
            for name, g in by_config}
    settings = {f"retained{share:g}": _setting_metrics(splits, moderators, configs, gate, share)
                for share in params.retained_harm_share}
    metrics = {"settings": settings, "facts": gate, "claims": _claims(settings, gate),
               "pool_size": int(records["pool"]["prompts"].iloc[0])}
    central = params.retained_harm_share[len(params.retained_harm_share) // 2]
    mean_configs = (configs[configs["retained_share"] == central]
                    .groupby("config", as_index=False, sort=False)[["hard", "random", "toxic", "over_refusal"]].mean())
    plot = pd.DataFrame({"x": mean_configs["hard"], "y": mean_configs["toxic"], "series": mean_configs["config"]})
    return RunOutput(metrics=metrics, tables={"plot": plot, "configs": configs, "facts": facts},
                     figure=_figure(mean_configs, central), setup=_setup(params, metrics), notes=_measured(metrics))


def spearman(x, y) -> float:
    """Spearman's rho; 0 when either side is constant (no monotone association to find); nan if any value is."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(sps.spearmanr(x, y).statistic)


def _worst(settings: dict, name: str, low: bool) -> dict:
    key = (min if low else max)(settings, key=lambda k: settings[k][name]["ci_low" if low else "ci_high"])
    return {**settings[key][name], "setting": key}


def _nan_min(values) -> float:
    """The minimum, nan as soon as one value is (an undefined rate leaves the claim undecided, never passes it)."""
    values = [float(v) for v in values]
    return float("nan") if any(np.isnan(values)) else min(values)


def _setting_metrics(splits: pd.DataFrame, moderators: pd.DataFrame, configs: pd.DataFrame, gate: dict,
                     share: float) -> dict:
    """Over seeds, at one retained-harm share: ensemble and control precision against the best single moderator,
    pipeline sizes, each configuration's refusal rates, the hard-subset tests and the rank correlations."""
    col = lambda name: est.per_seed(splits, name, retained_share=share)                      # noqa: E731
    singles = moderators[moderators["retained_share"] == share]
    names = list(dict.fromkeys(singles["moderator"]))
    best_single = singles.groupby("seed", sort=True)["precision"].max().to_numpy()
    here = configs[configs["retained_share"] == share]
    per_seed = [g for _, g in here.groupby("seed", sort=True)]
    fact_refusal = lambda g: [gate[c]["refused"] for c in g["config"]]                       # noqa: E731
    return {
        "ensemble_precision": stats.summarize(col("ensemble_precision")),
        "control_precision": stats.summarize(col("control_precision")),
        "single_precision": {name: stats.summarize(est.per_seed(singles, "precision", moderator=name)) for name in names},
        "ensemble_minus_best_single": stats.paired_difference(col("ensemble_precision"), best_single),
        "control_minus_best_single": stats.paired_difference(col("control_precision"), best_single),
        "candidate_benign_share": float(np.mean(col("candidate_benign_share"))),
        "sizes": {k: float(np.mean(col(k))) for k in ("candidates", "kept", "toxic_set", "random_sample")},
        "configs": {name: {k: float(g[k].mean()) for k in ("hard_size", "hard", "random", "random_hard", "toxic",
                                                            "over_refusal")}
                    for name, g in here.groupby("config", sort=False)},
        # a configuration with an empty hard subset leaves its seed's share undefined: nothing was hard to test
        "hard_share_per_seed": [float(g["hard_over_random"].mean()) if (g["hard_size"] > 0).all() else float("nan")
                                for g in per_seed],
        "random_hard_share_per_seed": [float(g["random_hard_over_random"].mean()) for g in per_seed],
        "spearman_per_seed": [spearman(g["toxic"], g["hard"]) for g in per_seed],
        "spearman_benign_per_seed": [spearman(g["toxic"], fact_refusal(g)) for g in per_seed],
        "spearman_whole_set_per_seed": [spearman(g["toxic"], g["over_refusal"]) for g in per_seed],
    }


def _claims(settings: dict, gate: dict) -> dict:
    seeds = len(next(iter(settings.values()))["hard_share_per_seed"])
    worst_per_seed = lambda name: [_nan_min(s[name][i] for s in settings.values()) for i in range(seeds)]  # noqa: E731
    plain = [name for name in gate if "+" not in name]   # each model as it comes, without the safety instruction
    return {
        "fact_accuracy_min": min(gate[name]["accuracy"] for name in plain),
        "ensemble_precision_worst": _worst(settings, "ensemble_precision", low=True),
        "ensemble_precision_by_setting": {k: s["ensemble_precision"]["mean"] for k, s in settings.items()},
        "ensemble_minus_best_single_worst": _worst(settings, "ensemble_minus_best_single", low=True),
        "control_minus_best_single_best": _worst(settings, "control_minus_best_single", low=False),
        "ensemble_minus_best_single_by_setting": {k: s["ensemble_minus_best_single"]["mean"] for k, s in settings.items()},
        "hard_share_per_seed": worst_per_seed("hard_share_per_seed"),
        "hard_share_min": _nan_min(worst_per_seed("hard_share_per_seed")),
        "hard_share_by_setting": {k: _nan_min(s["hard_share_per_seed"]) for k, s in settings.items()},
        "random_hard_share_max": max(max(s["random_hard_share_per_seed"]) for s in settings.values()),
        "spearman_per_seed": worst_per_seed("spearman_per_seed"),
        "spearman_min": _nan_min(worst_per_seed("spearman_per_seed")),
        "spearman_by_setting": {k: _nan_min(s["spearman_per_seed"]) for k, s in settings.items()},
        "spearman_benign_max": max(max(s["spearman_benign_per_seed"]) for s in settings.values()),
    }


def _figure(configs: pd.DataFrame, central: float):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    for _, row in configs.iterrows():
        left.plot(row["hard"], row["toxic"], "o", label=row["config"])
        right.plot(row["random"], row["hard"], "o", label=row["config"])
    left.set(xlabel="over-refusal rate on the (leave-one-out) hard subset", ylabel="rejection rate on the toxic set",
             title=f"configurations under test (mean over seeds, retained share {central:g})", xlim=(-0.05, 1.05),
             ylim=(-0.05, 1.05))
    right.plot([0, 1], [0, 1], "k:", lw=1)
    right.set(xlabel="over-refusal on a random sample", ylabel="over-refusal on the hard subset",
              title="is the hard subset harder?", xlim=(-0.05, 1.05), ylim=(-0.05, 1.05))
    left.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    return (f"One pool per run: {p.seeds_per_category} toxic seeds per category x {p.categories} categories "
            "(moderator/config.py's), each with 6 rewrites (3 benign, 3 keeping the harmful request): "
            f"{m['pool_size']} prompts, embedded once with MiniLM and answered once (greedy, {p.max_new_tokens} new "
            "tokens) by 4 configurations under test: SmolLM2-135M-Instruct (chat template, its default system prompt or "
            "the safety instruction as system turn) and Gemma-3-270M base (raw 'Question: ... Answer:' text, alone or "
            "after the safety instruction). A reply is a refusal when it opens as the official checkers' refusal "
            "openings say. Each seed splits the pool by action pair (one for the moderators, three for the benchmark); "
            f"each benchmark seed gets 3 rewrites, a swept share {p.retained_harm_share} of them harmful. Moderators: "
            "MiniLM + logistic, TF-IDF + naive Bayes, keyword rule; kept = majority says safe; the toxic set = benchmark "
            f"seeds the majority calls toxic. Hard subset of a configuration: kept prompts refused by >= {p.hard_votes} "
            f"of the 3 other configurations; the random sample has {p.random_sample_size} kept prompts. Capability "
            "gate: 20 benign factual questions.")


def _measured(m: dict) -> str:
    """The measured numbers, for the notes (how to read them is in NOTES.md)."""
    gate = "; ".join(f"{n} answers {v['accuracy']:.2f}, refuses {v['refused']:.2f}" for n, v in m["facts"].items())
    lines = [f"**Measured**, benign factual questions: {gate}."]
    for k, s in m["settings"].items():
        singles = ", ".join(f"{n} {v['mean']:.3f}" for n, v in s["single_precision"].items())
        rates = "; ".join(f"{n}: toxic {v['toxic']:.2f}, over-refusal {v['over_refusal']:.2f}, hard {v['hard']:.2f} "
                          f"(n {v['hard_size']:.1f}), random {v['random']:.2f}" for n, v in s["configs"].items())
        lines.append(f"**Measured**, {k}: candidates {s['sizes']['candidates']:.0f} (benign share "
                     f"{s['candidate_benign_share']:.3f}), kept {s['sizes']['kept']:.0f}, toxic set "
                     f"{s['sizes']['toxic_set']:.0f}; precision ensemble {s['ensemble_precision']['mean']:.3f} vs single "
                     f"moderators {singles}; permuted-label ensemble {s['control_precision']['mean']:.3f}. Refusal rates "
                     f"(mean over seeds): {rates}. Share of configurations significantly harder on 'hard' per seed "
                     f"{s['hard_share_per_seed']} (random 'hard' subset {s['random_hard_share_per_seed']}); Spearman per "
                     f"seed {[round(x, 3) for x in s['spearman_per_seed']]} (against refusal of the factual questions "
                     f"{[round(x, 3) for x in s['spearman_benign_per_seed']]}; against over-refusal on the whole kept "
                     f"set, not gated, {[round(x, 3) for x in s['spearman_whole_set_per_seed']]}).")
    return "\n\n".join(lines)
