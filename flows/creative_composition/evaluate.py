"""Creative composition, the evaluation: prevalence error, coding F1, filter and dedup rates and the usage-versus-
benchmark mismatch per setting of the sweep, the worst settings for the claims, the figure."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.creative_composition import method
from flows.creative_composition.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

KNOBS = ("creative_share", "duplicate_rate", "junk_share")


def _key(setting: tuple[float, float, float]) -> str:
    return "creative{:g}_dup{:g}_junk{:g}".format(*setting)


def _rows(table: pd.DataFrame, **where) -> pd.DataFrame:
    """The rows of ``table`` whose columns equal ``where``, in record order."""
    return table[(table[list(where)] == pd.Series(where)).all(axis=1)]


def _setting_metrics(records: Records, setting: tuple[float, float, float]) -> dict:
    where = dict(zip(KNOBS, setting))
    runs = records["runs"]
    summary = lambda name: est.summary(runs, name, **where)
    usage, planted = (est.seed_series(runs, column, where) for column in ("usage", "planted_usage"))
    code_math = method.suite_distribution(method.SUITES["code_math_heavy"])
    balanced = method.suite_distribution(method.SUITES["balanced"])
    gap = [method.js_divergence(np.array(u), code_math) - method.js_divergence(np.array(u), balanced) for u in usage]
    lost = _rows(records["lost_by_category"], **where)
    return {name: summary(name) for name in (
        "planted_creative_share", "estimated_creative_share", "estimated_creative_share_no_dedup", "abs_error",
        "abs_error_no_dedup", "abs_error_hdbscan", "macro_f1", "macro_f1_shuffled", "macro_f1_hdbscan", "macro_f1_per_prompt", "hdbscan_unclustered", "junk_removed",
        "clean_kept_by_filter", "copies_removed", "unique_removed_by_dedup", "k", "analysed", "log_size")
    } | {"jsd_gap": stats.summarize(gap),
         "lost_by_category": {c: float(np.mean(est.per_seed(lost, "lost", category=c))) for c in method.CATEGORIES
                              if (lost["category"] == c).any()},
         "jsd": {name: float(np.mean([method.js_divergence(np.array(u), method.suite_distribution(mix))
                                      for u in usage])) for name, mix in method.SUITES.items()},
         "jsd_planted": {name: float(np.mean([method.js_divergence(np.array(u), method.suite_distribution(mix))
                                              for u in planted])) for name, mix in method.SUITES.items()}}


def _extreme(settings: dict, name: str, worst: str) -> dict:
    """The setting whose interval is least favourable (``worst="max"``: highest ci_high; ``"min"``: lowest ci_low)."""
    key = (max(settings, key=lambda k: settings[k][name]["ci_high"]) if worst == "max"
           else min(settings, key=lambda k: settings[k][name]["ci_low"]))
    return {**settings[key][name], "setting": key}


def _claims(settings: dict) -> dict:
    """Worst settings for the claims and sanity checks, most favourable settings for the controls."""
    return {
        "abs_error_worst": _extreme(settings, "abs_error", "max"),
        "abs_error_by_setting": {k: s["abs_error"]["mean"] for k, s in settings.items()},
        "abs_error_no_dedup_best": _extreme(settings, "abs_error_no_dedup", "min"),
        "macro_f1_worst": _extreme(settings, "macro_f1", "min"),
        "macro_f1_by_setting": {k: s["macro_f1"]["mean"] for k, s in settings.items()},
        "macro_f1_shuffled_best": _extreme(settings, "macro_f1_shuffled", "max"),
        "jsd_gap_worst": _extreme(settings, "jsd_gap", "min"),
        "junk_removed_worst": _extreme(settings, "junk_removed", "min"),
        "clean_kept_worst": _extreme(settings, "clean_kept_by_filter", "min"),
        "copies_removed_worst": _extreme(settings, "copies_removed", "min"),
    }



def evaluate(params: Params, records: Records) -> RunOutput:
    settings = method.sweep_settings(params)
    by_setting = {_key(s): _setting_metrics(records, s) for s in settings}
    central = _key(settings[0])
    metrics = {"settings": by_setting, "central_setting": central, "claims": _claims(by_setting)}
    if "real_data" in records.tables:
        metrics["real_data"] = real = json.loads(records["real_data"]["analysis"].iloc[0])
        share = real["creative_share"]  # Clopper-Pearson over the analysed prompts (the paper's prevalence interval)
        share.update({k: v for k, v in stats.proportion_ci(share["creative_prompts"], share["analysed"]).items()
                      if k in ("ci_low", "ci_high")})

    runs = records["runs"]
    runs_table = runs.drop(columns=["usage", "planted_usage"])
    at_central = dict(zip(KNOBS, settings[0]))
    # the themes of the run's first seed at the central setting
    themes = _rows(records["themes"], seed=records.seeds[0], **at_central).drop(columns=["seed", *KNOBS])
    usage = _usage_table(_rows(runs, **at_central))
    plot = pd.DataFrame([{"x": k, "y": s[name]["mean"], "series": name} for k, s in by_setting.items()
                         for name in ("planted_creative_share", "estimated_creative_share", "macro_f1", "macro_f1_shuffled",
                                      "abs_error", "abs_error_no_dedup")])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": runs_table,
                                              "themes_central_seed0": themes.reset_index(drop=True),
                                              "usage_vs_suites_central": usage},
                     figure=_figure(by_setting), setup=_setup(params, metrics), notes=_measured(metrics, themes))


def _usage_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per category: planted and estimated usage share (mean over seeds) beside each suite's declared share."""
    table = pd.DataFrame({"category": method.CATEGORIES,
                          "creative": [c in method.CREATIVE for c in method.CATEGORIES],
                          "planted_usage": np.mean(rows["planted_usage"].to_list(), axis=0),
                          "estimated_usage": np.mean(rows["usage"].to_list(), axis=0)})
    for name, mix in method.SUITES.items():
        table[name] = method.suite_distribution(mix)
    return table


def _figure(settings: dict):
    keys = list(settings)
    x = np.arange(len(keys))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, label, marker in (("planted_creative_share", "planted", "s"), ("estimated_creative_share", "pipeline", "o"),
                                ("estimated_creative_share_no_dedup", "control: pipeline without dedup", "x")):
        mean = np.array([settings[k][name]["mean"] for k in keys])
        err = np.array([[settings[k][name]["mean"] - settings[k][name]["ci_low"],
                         settings[k][name]["ci_high"] - settings[k][name]["mean"]] for k in keys]).T
        left.errorbar(x, mean, yerr=err, fmt=marker, label=label, capsize=3)
    left.set(xticks=x, ylabel="creative-composition share of unique prompts", title="prevalence, per simulated log")
    left.set_xticklabels(keys, rotation=45, ha="right", fontsize=7)
    left.legend(fontsize=8)
    for name, label, marker in (("macro_f1", "KMeans + zero-shot coding", "o"), ("macro_f1_hdbscan", "HDBSCAN + coding", "^"),
                                ("macro_f1_per_prompt", "each prompt coded alone (no clusters)", "s"),
                                ("macro_f1_shuffled", "control: shuffled embeddings", "x")):
        right.plot(x, [settings[k][name]["mean"] for k in keys], marker, label=label)
    right.axhline(0.8, color="grey", ls="--", lw=0.8)
    right.set(xticks=x, ylabel="macro-F1 over 12 categories", title="thematic coding", ylim=(0, 1))
    right.set_xticklabels(keys, rotation=45, ha="right", fontsize=7)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    c = m["settings"][m["central_setting"]]
    return (f"Each seed generates a synthetic prompt log: {p.n_prompts} clean unique prompts from hand-written templates "
            f"with Faker entities in 12 use categories (6 creative-composition subcategories: "
            f"{', '.join(method.CREATIVE)}; 6 others), near-duplicate resubmissions of {p.heavy_users} heavy users' "
            "creative prompts (case, punctuation, polite words, a dropped letter), and junk in four equal kinds "
            "(German/French/Spanish/Russian/Chinese prompts, moderation keywords, under "
            f"{p.min_words} words, over {p.max_words} words). Knobs, one at a time around the central setting "
            f"{m['central_setting']}: creative share {p.creative_share}, near-duplicate rate {p.duplicate_rate}, junk "
            f"share {p.junk_share} ({len(m['settings'])} settings x {p.seeds} seeds; a log holds about "
            f"{c['log_size']['mean']:.0f} prompts at the central setting). Pipeline: length filter, keyword moderation, "
            f"langdetect English filter; datasketch MinHash LSH ({p.minhash_permutations} permutations, character "
            f"5-grams, Jaccard >= {p.dedup_threshold}); offline all-MiniLM-L6-v2 embeddings; scikit-learn KMeans "
            f"(k in {p.k_grid} by silhouette, {p.kmeans_inits} inits) and HDBSCAN (min cluster size "
            f"{p.hdbscan_min_cluster_size}) beside it; each cluster coded zero-shot to the nearest of 12 codebook "
            "descriptions (cosine of MiniLM centroids), with c-TF-IDF top terms for auditing. Benchmark suites: four "
            f"declared category mixes ({', '.join(method.SUITES)}); mismatch = Jensen-Shannon divergence (bits).")


def _measured(m: dict, themes: pd.DataFrame) -> str:
    """The measured numbers, for the notes (how to read them is in NOTES.md)."""
    c, s = m["claims"], m["settings"]
    fmt = lambda d: f"{d['mean']:.3f} [{d['ci_low']:.3f}, {d['ci_high']:.3f}]"
    lines = [
        "Creative share, planted -> estimated (no-dedup control), per setting: "
        + "; ".join(f"{k}: {v['planted_creative_share']['mean']:.3f} -> {v['estimated_creative_share']['mean']:.3f} "
                    f"(abs error {v['abs_error']['mean']:.3f}, without dedup {v['abs_error_no_dedup']['mean']:.3f}, "
                    f"HDBSCAN {v['abs_error_hdbscan']['mean']:.3f})" for k, v in s.items()) + ".",
        f"Worst absolute error {fmt(c['abs_error_worst'])} at {c['abs_error_worst']['setting']}; the no-dedup control's "
        f"best {fmt(c['abs_error_no_dedup_best'])} at {c['abs_error_no_dedup_best']['setting']}.",
        "Macro-F1 per setting (KMeans / HDBSCAN / each prompt coded alone / shuffled control; chosen k): "
        + "; ".join(f"{k}: {v['macro_f1']['mean']:.3f} / {v['macro_f1_hdbscan']['mean']:.3f} / "
                    f"{v['macro_f1_per_prompt']['mean']:.3f} / {v['macro_f1_shuffled']['mean']:.3f}; "
                    f"k = {v['k']['mean']:.1f}" for k, v in s.items()) + ".",
        "Filters and dedup per setting (junk removed / clean kept / copies removed / unique prompts wrongly removed "
        "by dedup): " + "; ".join(f"{k}: {v['junk_removed']['mean']:.3f} / {v['clean_kept_by_filter']['mean']:.3f} / "
                                  f"{v['copies_removed']['mean']:.3f} / {v['unique_removed_by_dedup']['mean']:.3f}"
                                  for k, v in s.items()) + ".",
        f"Distinct prompts lost to dedup (no member of their group survives) at {m['central_setting']}, per category: "
        + ", ".join(f"{k} {v:.3f}" for k, v in s[m["central_setting"]]["lost_by_category"].items())
        + ".",
        f"JSD (bits) of the estimated usage to each suite at {m['central_setting']} (planted usage in brackets): "
        + "; ".join(f"{name}: {v:.3f} ({s[m['central_setting']]['jsd_planted'][name]:.3f})"
                    for name, v in s[m["central_setting"]]["jsd"].items()) + ".",
        "Themes of seed 0 at the central setting (cluster size, coded category, top c-TF-IDF terms): "
        + "; ".join(f"{r.size} {r.category} ({r.top_terms})" for r in themes.itertuples()) + ".",
    ]
    if "real_data" in m:
        r = m["real_data"]
        lines.append(f"Real prompts ({r['prompts']} read, {r['kept_by_filter']} past the filters, {r['unique']} unique): "
                     f"creative share {fmt(r['creative_share'])} (Clopper-Pearson interval over prompts), k = {r['k']}; JSD to suites "
                     + ", ".join(f"{n}: {v:.3f}" for n, v in r["jsd"].items()) + ".")
    return "\n\n".join(lines)
