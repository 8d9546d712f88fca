"""BDC mitigation assessment, the evaluation: fidelity and resistance of each strategy against vanilla, the
semantic-altering against semantic-preserving gaps, accuracy matching, the figure, from the per-seed records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.bdc_mitigation import method
from flows.bdc_mitigation.claims import MATCH_TOLERANCE
from flows.bdc_mitigation.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, training, examples = records["scores"], records["training"], records["examples"]
    kinds = method.strategy_kinds(params)
    table = (rows.groupby(["recipe", "strategy", "family"], sort=False).mean(numeric_only=True).drop(columns="seed")
             .reset_index())
    table.insert(2, "kind", table.strategy.map(kinds))
    whole = table[table.family == "all"]
    metrics = {"claims": _claims(rows, params),
               # every metric of every strategy on the whole benchmark, mean over seeds
               "strategies": {r: {row.strategy: {c: float(getattr(row, c)) for c in whole.columns[4:]}
                                  for row in t.itertuples()} for r, t in whole.groupby("recipe", sort=False)},
               "benchmark": {"items": 3 * params.bench_per_family, "placebo_items": 3 * params.bench_per_family,
                             "strategies": len(kinds) - 1},
               # each fine-tune's steps and its loss on its first and last batch, mean over seeds
               "training": {run: {c: float(t[c].mean()) for c in ("steps", "first_loss", "last_loss")}
                            for run, t in training.groupby("run", sort=False)}}
    plot = pd.DataFrame({"x": whole.fidelity, "y": whole.resistance, "series": whole.recipe + " / " + whole.kind})
    versus_vanilla = pd.DataFrame([{"recipe": r, "strategy": s, "kind": kinds[s], "family": f,
                                    **_resistance_minus_vanilla(rows, r, s, f)}
                                   for r in method.recipes(params) for s in kinds if s != method.VANILLA
                                   for f in ("all", *method.FAMILIES)])
    return RunOutput(metrics=metrics, tables={"plot": plot, "strategies": table, "examples": examples,
                                              "training": training, "resistance_minus_vanilla": versus_vanilla},
                     figure=_figure(whole), setup=_setup(params, metrics, examples), notes=_measured(metrics, table))


def _means(frame: pd.DataFrame, column: str, recipe: str, family: str, strategies: list[str]) -> np.ndarray:
    """Per-seed mean of ``column`` over ``strategies`` (shape (n_seeds,), seeds in order)."""
    rows = frame[(frame.recipe == recipe) & (frame.family == family) & frame.strategy.isin(strategies)]
    return rows.groupby("seed")[column].mean().sort_index().to_numpy()


def _per_seed(frame: pd.DataFrame, column: str, recipe: str, family: str, strategy: str) -> np.ndarray:
    return est.per_seed(frame, column, recipe=recipe, family=family, strategy=strategy)


def _resistance_minus_vanilla(frame: pd.DataFrame, recipe: str, strategy: str, family: str) -> dict[str, float]:
    """Paired difference over seeds of a strategy's resistance and vanilla's."""
    return stats.paired_difference(_per_seed(frame, "resistance", recipe, family, strategy),
                                   _per_seed(frame, "resistance", recipe, family, method.VANILLA))


def _beating_vanilla(frame: pd.DataFrame, recipe: str, strategies: list[str]) -> tuple[int, dict[str, int]]:
    """How many ``strategies`` beat vanilla's resistance (paired Student-t lower bound > 0) in every family, and
    how many in each family."""
    significant = {s: {f: _resistance_minus_vanilla(frame, recipe, s, f)["ci_low"] > 0 for f in method.FAMILIES}
                   for s in strategies}
    per_family = {f: sum(significant[s][f] for s in strategies) for f in method.FAMILIES}
    return sum(all(by_family.values()) for by_family in significant.values()), per_family


def _claims(frame: pd.DataFrame, p: Params) -> dict:
    kinds = method.strategy_kinds(p)
    typos = [s for s in kinds if s.startswith("typo_")]
    preserving = [s for s, k in kinds.items() if k == method.SEMANTIC_PRESERVING]
    altering = [s for s, k in kinds.items() if k == method.SEMANTIC_ALTERING]
    preserving_at = {t: [s for s in preserving if s not in typos or s == t] for t in typos}  # one typo rate each
    recipes = list(method.recipes(p))
    out: dict = {"preserving_beating_vanilla": {}, "preserving_beating_vanilla_by_family": {},
                 "altering_beating_vanilla": {}}
    for r in recipes:
        count, out["preserving_beating_vanilla_by_family"][r] = _beating_vanilla(frame, r, preserving)
        out["preserving_beating_vanilla"][r] = count
        out["altering_beating_vanilla"][r] = _beating_vanilla(frame, r, altering)[0]

    gap = lambda column, r, t, family="all": stats.paired_difference(_means(frame, column, r, family, altering),
                                                                     _means(frame, column, r, family, preserving_at[t]))
    resistance = {f"{r}_{t}": gap("resistance", r, t) for r in recipes for t in typos}
    placebo = {f"{r}_{t}": gap("placebo_resistance", r, t) for r in recipes for t in typos}
    # fidelity uses the clean model only: identical under both recipes
    fidelity = {t: gap("fidelity", recipes[0], t) for t in typos}
    random = {t: gap("random_fidelity", recipes[0], t) for t in typos}
    # worst settings for the claims, most favourable ones for their controls (a control must fail everywhere)
    worst_res = min(resistance, key=lambda k: resistance[k]["ci_low"])
    best_placebo = max(placebo, key=lambda k: placebo[k]["ci_low"])
    worst_fid = max(fidelity, key=lambda k: fidelity[k]["ci_high"])
    best_random = min(random, key=lambda k: random[k]["ci_high"])
    out |= {
        "altering_minus_preserving_resistance_worst": {**resistance[worst_res], "setting": worst_res},
        "altering_minus_preserving_resistance_by_setting": {f"{r}_{t}_{f}": gap("resistance", r, t, f)["mean"]
                                                            for r in recipes for t in typos for f in method.FAMILIES},
        "placebo_altering_minus_preserving_best": {**placebo[best_placebo], "setting": best_placebo},
        "altering_minus_preserving_fidelity_worst": {**fidelity[worst_fid], "setting": worst_fid},
        "altering_minus_preserving_fidelity_by_setting": {f"{t}_{f}": gap("fidelity", recipes[0], t, f)["mean"]
                                                          for t in typos for f in method.FAMILIES},
        "random_altering_minus_preserving_fidelity_best": {**random[best_random], "setting": best_random},
    }

    whole = frame[frame.family == "all"]
    by_pair = (whole[whole.strategy != method.VANILLA].groupby(["recipe", "strategy"])
               [["accuracy_gap_to_clean", "resistance"]].mean())
    matched = by_pair[by_pair.accuracy_gap_to_clean.abs() < MATCH_TOLERANCE]
    if len(matched):
        r, s = matched.resistance.idxmin()
        out["matched_lowest_resistance"] = {**stats.summarize(_per_seed(frame, "resistance", r, "all", s)),
                                            "recipe": r, "strategy": s}
        out["matched_placebo_resistance"] = stats.summarize(_per_seed(frame, "placebo_resistance", r, "all", s))
    else:
        nan = {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}
        out["matched_lowest_resistance"], out["matched_placebo_resistance"] = nan, dict(nan)
    out["matched_pairs"] = [f"{r}/{s}" for r, s in matched.index]

    clean = _per_seed(frame, "acc_clean_original", recipes[0], "all", method.VANILLA)
    out["clean_accuracy_above_chance"] = stats.summarize(clean - 0.25)
    gains = {r: stats.paired_difference(_per_seed(frame, "acc_conta_original", r, "all", method.VANILLA), clean)
             for r in recipes}
    worst_gain = min(gains, key=lambda r: gains[r]["ci_low"])
    out["contamination_gain_worst"] = {**gains[worst_gain], "setting": worst_gain}
    out["contamination_gain_by_recipe"] = {r: g["mean"] for r, g in gains.items()}
    # rounded: the identity is exact in counts, and shares of the same counts cancel only to ~1e-16
    out["mismatch_minus_accuracy_gap_min"] = round(float(
        ((1 - frame.resistance) - (frame.acc_conta_updated - frame.acc_clean_updated).abs()).min()), 12) + 0.0
    return out


def _figure(whole: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharex=True, sharey=True)
    markers = {method.VANILLA: "*", method.SEMANTIC_PRESERVING: "o", method.SEMANTIC_ALTERING: "s"}
    for axis, (recipe, t) in zip(axes, whole.groupby("recipe", sort=False)):
        for _, row in t.iterrows():
            axis.plot(row.fidelity, row.resistance, markers[row.kind], color=f"C{list(markers).index(row.kind)}")
            axis.annotate(row.strategy, (row.fidelity, row.resistance), fontsize=7, xytext=(3, 3),
                          textcoords="offset points")
        axis.set(xlabel="fidelity", ylabel="contamination resistance", title=f"{recipe} contamination")
    fig.suptitle("star: vanilla (no update), circles: semantic-preserving, squares: semantic-altering; whole benchmark, "
                 "mean over seeds", fontsize=9)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict, examples: pd.DataFrame) -> str:
    b, t = m["benchmark"], m["training"]
    shown = examples[examples.seed == examples.seed.min()].drop_duplicates("strategy")
    shown = shown[shown.strategy.isin([method.VANILLA, "paraphrase", "new_answer", "reverse_question"])]
    return (f"Model: {p.model} (tasks.pretrained, float32, CPU). Per seed, a four-choice benchmark of "
            f"{b['items']} items ({p.bench_per_family} per family: capitals of real countries, word categories, "
            "one-digit sums), drawn from disjoint fact pools (benchmark, placebo, reserve), and its update by each "
            f"of {b['strategies']} rule-based strategies (the typo rule at each swept rate {p.typo_rates}). "
            "Multiple choice is scored as a cloze: prompt \"Question: <q>\\nAnswer:\", choice = the highest "
            f"log p(\" \" + choice | prompt). Contaminated = LoRA (rank {p.lora_rank}, q/v projections, AdamW lr "
            f"{p.lr}, batch {p.batch_size}) on the original benchmark's question + answer texts: mild = the first "
            f"{p.mild_epochs} epoch(s) ({t['mild']['steps']:.0f} steps), intensive = the same run continued to "
            f"{p.intensive_epochs} epochs ({t['intensive']['steps']:.0f} steps; training loss "
            f"{t['mild']['first_loss']:.2f} -> {t['intensive']['last_loss']:.2f}); placebo = the intensive recipe "
            f"on {b['placebo_items']} held-out items about other facts (loss {t['placebo']['first_loss']:.2f} -> "
            f"{t['placebo']['last_loss']:.2f}). Metrics per the official calculate_metrics.ipynb: fidelity = "
            "mean(clean_updated == clean_original), resistance = mean(clean_updated == conta_updated). "
            f"{p.seeds} seeds (benchmark draw, strategy randomness, LoRA init and data order); intervals are 95% "
            "Student-t intervals over seeds (paired by seed for differences). Examples (first seed): "
            + "; ".join(f"{r.strategy}: \"{r.question}\" ({r.options}; right: {r.answer})" for r in shown.itertuples())
            + ".")


def _measured(m: dict, table: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    c, whole = m["claims"], table[table.family == "all"]
    vanilla = table[(table.strategy == method.VANILLA) & (table.family != "all")]
    lines = ["**Measured**: per family, vanilla benchmark (clean accuracy / contaminated accuracy / resistance): "
             + "; ".join(f"{r.recipe} {r.family} {r.acc_clean_original:.3f} / {r.acc_conta_original:.3f} / "
                         f"{r.resistance:.3f}" for r in vanilla.itertuples()) + ".",
             "Per strategy, whole benchmark, mean over seeds (fidelity / resistance / placebo resistance / accuracy "
             "drop / contaminated-minus-clean accuracy):"]
    for recipe, t in whole.groupby("recipe", sort=False):
        lines.append(f"- {recipe}: " + "; ".join(
            f"{r.strategy} {r.fidelity:.3f} / {r.resistance:.3f} / {r.placebo_resistance:.3f} / {r.accuracy_drop:+.3f} / "
            f"{r.accuracy_gap_to_clean:+.3f}" for r in t.itertuples()))
    lines.append("Semantic-preserving strategies beating vanilla's resistance significantly, per family: "
                 + "; ".join(f"{r}: {v}" for r, v in c["preserving_beating_vanilla_by_family"].items())
                 + f" (in every family: {c['preserving_beating_vanilla']}; semantic-altering: "
                 f"{c['altering_beating_vanilla']}).")
    lines.append(f"Accuracy-matched (recipe/strategy) pairs (|delta acc| < {MATCH_TOLERANCE:g}): "
                 + (", ".join(c["matched_pairs"]) or "none") + ".")
    return "\n\n".join(lines)
