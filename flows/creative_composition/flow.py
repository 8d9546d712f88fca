"""Creative composition (Shen & Guestrin) as a Prefect flow: the thematic analysis of a prompt log (filters, MinHash
dedup, MiniLM embeddings, clustering, zero-shot coding) on planted logs with known use categories, across a sweep
of the simulated log's knobs, and the usage-versus-benchmark mismatch."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.creative_composition import method
from flows.creative_composition.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow, run_task

SWEEP = ("over the sweep of the simulated log's knobs (planted creative share, near-duplicate rate, junk share, "
         "each over its range with the others at their middle value; worst setting)")

PAPER = Paper(
    slug="creative_composition",
    title="Position: Societal Impacts Research Requires Benchmarks for Creative Composition Tasks",
    method="thematic analysis of user prompts: moderation/language/length filters, MinHash dedup, embedding "
           "clustering and coding into use categories; usage-vs-benchmark mismatch",
    paper_class="C",
    source="abstracts-003.txt #8",
    official_code=None,
    claims=(
        Claim(id="thematic_analysis_recovers_creative_prevalence",
              text=("Through a thematic analysis using 2 million language model user prompts, we identify creative "
                    "composition tasks as a prevalent usage category -- the pipeline (filters, MinHash dedup, MiniLM, "
                    "KMeans with silhouette k, zero-shot coding) estimates the creative-composition share of the unique "
                    f"use cases within 5 points of the planted share: |estimated - planted| < 0.05, {SWEEP}"),
              source="abstract; plan claim 1 (magnitude)", metric="claims.abs_error_worst.mean", comparison="<",
              threshold=0.05, kind="magnitude", role="claim", interval=ci("claims.abs_error_worst"),
              per_setting="claims.abs_error_by_setting",
              control=Control(name="the same pipeline without MinHash dedup (heavy users' copies counted), its best setting",
                              metric="claims.abs_error_no_dedup_best.mean",
                              interval=ci("claims.abs_error_no_dedup_best"))),
        Claim(id="zero_shot_coding_matches_categories",
              text=("the thematic analysis codes prompts into use categories (the fine-grained analysis) -- prompt-level "
                    "macro-F1 over the 12 planted categories of cluster-then-code labels >= 0.8 (junk that passes the "
                    f"filters counts as an error), {SWEEP}"),
              source="abstract; plan claim 2 (magnitude)", metric="claims.macro_f1_worst.mean", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", interval=ci("claims.macro_f1_worst"),
              per_setting="claims.macro_f1_by_setting",
              control=Control(name="the same coder on clusters of embeddings permuted across prompts, its best setting",
                              metric="claims.macro_f1_shuffled_best.mean", interval=ci("claims.macro_f1_shuffled_best"))),
        Claim(id="mismatch_metric_orders_suites",
              text=("mismatches between current benchmarks and usage patterns -- the suites' mixes are declared here, so "
                    "this only checks the metric: JSD(estimated usage || code/math-heavy suite) - JSD(estimated usage || "
                    "suite covering every category equally) > 0, worst setting"),
              source="abstract; plan claim 3 (direction, sanity of the mismatch metric)",
              metric="claims.jsd_gap_worst.mean", comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("claims.jsd_gap_worst")),
        Claim(id="filters_drop_junk",
              text=("the moderation, language and length filters drop at least 90% of the planted junk prompts, worst "
                    "setting (checks our filter stage)"),
              source="plan (filtering stage)", metric="claims.junk_removed_worst.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("claims.junk_removed_worst")),
        Claim(id="filters_keep_clean_prompts",
              text=("the filters keep at least 90% of the clean English prompts (langdetect on short prompts is the "
                    "risk), worst setting (checks our filter stage)"),
              source="plan (filtering stage)", metric="claims.clean_kept_worst.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("claims.clean_kept_worst")),
        Claim(id="minhash_removes_near_duplicates",
              text=("MinHash LSH dedup removes at least 90% of the surplus near-duplicates that pass the filters (all "
                    "but one member of each heavy user's prompt-and-copies group), worst setting (checks our dedup stage)"),
              source="plan (deduplication stage)", metric="claims.copies_removed_worst.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="sanity", interval=ci("claims.copies_removed_worst")),
    ),
    limitations=(
        "What the stand-in cannot show: any fact about real usage, including the paper's ~30% creative share (the share "
        "is planted here and swept), and nothing about the societal-harm argument, which is normative. The log is "
        "hand-written templates with Faker entities in 12 categories, far more separable than real prompts, with no "
        "multi-intent or multi-turn prompts; its three knobs (creative share, near-duplicate rate, junk share) are "
        "swept one at a time and every verdict is the worst setting. The human coding of the paper is replaced by "
        "zero-shot coding of cluster centroids against a fixed 12-category codebook, so themes the codebook lacks "
        "cannot emerge. How far MinHash dedup merges distinct short prompts depends on how varied the templates are, "
        "a property of this generator that is not swept. Moderation is a keyword list, not the OpenAI moderation "
        "flags WildChat carries. The benchmark "
        "suites are declared category mixes, not real benchmarks, so the mismatch check is a check of the metric. "
        "A loader for a local JSONL of real prompts (params real_prompts_jsonl) runs the same pipeline on them when "
        "a user has e.g. WildChat on disk; it is never used by default or in tests."
    ),
)


def sweep_settings(p: Params) -> list[tuple[float, float, float]]:
    """The central setting (each knob's middle value) and each knob over its range with the others central."""
    knobs = (p.creative_share, p.duplicate_rate, p.junk_share)
    central = tuple(values[len(values) // 2] for values in knobs)
    settings = [central]
    for position, values in enumerate(knobs):
        settings += [central[:position] + (v,) + central[position + 1:] for v in values if v != central[position]]
    return settings


def _key(setting: tuple[float, float, float]) -> str:
    return "creative{:g}_dup{:g}_junk{:g}".format(*setting)


def _setting_metrics(rows: list[dict]) -> dict:
    rows = sorted(rows, key=lambda r: r["seed"])
    summary = lambda name: stats.summarize([r[name] for r in rows])
    code_math = method.suite_distribution(method.SUITES["code_math_heavy"])
    balanced = method.suite_distribution(method.SUITES["balanced"])
    gap = [method.js_divergence(np.array(r["usage"]), code_math) - method.js_divergence(np.array(r["usage"]), balanced)
           for r in rows]
    return {name: summary(name) for name in (
        "planted_creative_share", "estimated_creative_share", "estimated_creative_share_no_dedup", "abs_error",
        "abs_error_no_dedup", "abs_error_hdbscan", "macro_f1", "macro_f1_shuffled", "macro_f1_hdbscan", "macro_f1_per_prompt", "hdbscan_unclustered", "junk_removed",
        "clean_kept_by_filter", "copies_removed", "unique_removed_by_dedup", "k", "analysed", "log_size")
    } | {"jsd_gap": stats.summarize(gap),
         "lost_by_category": {c: float(np.mean(lost)) for c in method.CATEGORIES
                              if (lost := [r["lost_by_category"][c] for r in rows if c in r["lost_by_category"]])},
         "jsd": {name: float(np.mean([method.js_divergence(np.array(r["usage"]), method.suite_distribution(mix))
                                      for r in rows])) for name, mix in method.SUITES.items()},
         "jsd_planted": {name: float(np.mean([method.js_divergence(np.array(r["planted_usage"]),
                                                                   method.suite_distribution(mix)) for r in rows]))
                         for name, mix in method.SUITES.items()}}


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


@paper_flow(PAPER, Params, smoke=SMOKE)
def creative_composition_flow(params: Params, ctx: RunContext) -> RunOutput:
    settings = sweep_settings(params)
    runs = [row for rows in over_seeds(method.run_seed, ctx.seeds, p=params, settings=settings) for row in rows]
    by_setting = {_key(s): _setting_metrics([r for r in runs if (r["creative_share"], r["duplicate_rate"],
                                                                  r["junk_share"]) == s]) for s in settings}
    central = _key(settings[0])
    metrics = {"settings": by_setting, "central_setting": central, "claims": _claims(by_setting)}
    if params.real_prompts_jsonl:
        texts = method.load_prompts_jsonl(Path(params.real_prompts_jsonl), params.real_max_prompts)
        metrics["real_data"] = run_task(method.analyse_real, texts=texts, p=params)

    runs_table = pd.DataFrame([{k: v for k, v in r.items()
                                if k not in ("usage", "planted_usage", "themes", "prevalence_interval", "lost_by_category")}
                               | {"prevalence_ci_low": r["prevalence_interval"][0], "prevalence_ci_high": r["prevalence_interval"][1]}
                               for r in runs])
    save_parquet(runs_table, ctx.data_dir / "runs.parquet")
    first_central = next(r for r in runs if _key((r["creative_share"], r["duplicate_rate"], r["junk_share"])) == central)
    themes = pd.DataFrame(first_central["themes"])
    usage = _usage_table([r for r in runs if _key((r["creative_share"], r["duplicate_rate"], r["junk_share"])) == central])
    plot = pd.DataFrame([{"x": k, "y": s[name]["mean"], "series": name} for k, s in by_setting.items()
                         for name in ("planted_creative_share", "estimated_creative_share", "macro_f1", "macro_f1_shuffled",
                                      "abs_error", "abs_error_no_dedup")])
    return RunOutput(metrics=metrics, tables={"plot": plot, "runs": runs_table, "themes_central_seed0": themes,
                                              "usage_vs_suites_central": usage},
                     figure=_figure(by_setting), setup=_setup(params, metrics), notes=_notes(metrics, themes))


def _usage_table(rows: list[dict]) -> pd.DataFrame:
    """Per category: planted and estimated usage share (mean over seeds) beside each suite's declared share."""
    table = pd.DataFrame({"category": method.CATEGORIES,
                          "creative": [c in method.CREATIVE for c in method.CATEGORIES],
                          "planted_usage": np.mean([r["planted_usage"] for r in rows], axis=0),
                          "estimated_usage": np.mean([r["usage"] for r in rows], axis=0)})
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


def _notes(m: dict, themes: pd.DataFrame) -> str:
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
        + ". Distinct prompts of one template that differ in a single short slot reach the Jaccard threshold, so the "
        "categories with short, low-variety templates lose more distinct use cases than the others, and the "
        "estimated prevalence shifts toward the others: MinHash dedup of short prompts is itself a source of "
        "category bias.",
        f"JSD (bits) of the estimated usage to each suite at {m['central_setting']} (planted usage in brackets): "
        + "; ".join(f"{name}: {v:.3f} ({s[m['central_setting']]['jsd_planted'][name]:.3f})"
                    for name, v in s[m["central_setting"]]["jsd"].items()) + ".",
        "Themes of seed 0 at the central setting (cluster size, coded category, top c-TF-IDF terms): "
        + "; ".join(f"{r.size} {r.category} ({r.top_terms})" for r in themes.itertuples()) + ".",
    ]
    if "real_data" in m:
        r = m["real_data"]
        lines.append(f"Real prompts ({r['prompts']} read, {r['kept_by_filter']} past the filters, {r['unique']} unique): "
                     f"creative share {fmt(r['creative_share'])} (bootstrap over prompts), k = {r['k']}; JSD to suites "
                     + ", ".join(f"{n}: {v:.3f}" for n, v in r["jsd"].items()) + ".")
    return "\n\n".join(lines)
