"""LLM-SRBench, the evaluation: symbolic accuracy, Acc_tau and NMSE per category and method, the memorizer's
drop on rewrites and the OOD-vs-ID NMSE gap, from the records; the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.llm_srbench import method
from flows.llm_srbench.params import Params
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

SEARCHING = ("gplearn", "skeleton_search", "memorizer")
"""The methods the claims compare (the mean and the oracle skeleton are yardsticks, not methods)."""
NMSE_FLOOR = 1e-10
"""NMSE below this is an exact fit up to float64 rounding; the OOD-vs-ID comparison treats all such fits as equal."""


def _per_seed(rows: pd.DataFrame, category: str, method_name: str, column: str, statistic: str) -> np.ndarray:
    """One value per seed (seed order): the mean, or the log10 of the floored median, of ``column`` over problems."""
    group = rows[(rows["category"] == category) & (rows["method"] == method_name)].groupby("seed", sort=True)[column]
    if statistic == "mean":
        return group.mean().to_numpy()
    return np.log10(np.maximum(group.median().to_numpy(), NMSE_FLOOR))


def _results(rows: pd.DataFrame) -> dict:
    """Every (category, method) pair's symbolic accuracy, Acc_0.1 and median NMSE per split, over seeds."""
    out: dict = {}
    for (category, name), _ in rows.groupby(["category", "method"], sort=False):
        acc = lambda column: stats.summarize(_per_seed(rows, category, name, column, "mean"))
        nmse = lambda split: stats.summarize(_per_seed(rows, category, name, f"nmse_{split}", "log10_median"))
        out.setdefault(category, {})[name] = {
            "symbolic_accuracy": acc("symbolic"), "acc_tau_id": acc("acc_tau_id"), "acc_tau_ood": acc("acc_tau_ood"),
            "log10_median_nmse_id": nmse("id"), "log10_median_nmse_id2": nmse("id2"),
            "log10_median_nmse_ood": nmse("ood")}
    return out


def _claims(rows: pd.DataFrame) -> dict:
    """Worst method for the OOD claim, most favourable method for its control; the best method for the hardness claim."""
    log_median = lambda name, split: _per_seed(rows, "synth", name, f"nmse_{split}", "log10_median")
    ood = {m: stats.paired_difference(log_median(m, "ood"), log_median(m, "id")) for m in SEARCHING}
    id2 = {m: stats.paired_difference(log_median(m, "id2"), log_median(m, "id")) for m in SEARCHING}
    synth = {m: stats.summarize(_per_seed(rows, "synth", m, "symbolic", "mean")) for m in SEARCHING}
    worst, favourable = min(ood, key=lambda m: ood[m]["ci_low"]), max(id2, key=lambda m: id2[m]["ci_low"])
    best = max(synth, key=lambda m: synth[m]["mean"])
    return {
        "memorizer_transform_acc": stats.summarize(_per_seed(rows, "transform", "memorizer", "symbolic", "mean")),
        "memorizer_original_acc": stats.summarize(_per_seed(rows, "original", "memorizer", "symbolic", "mean")),
        "ood_minus_id_worst": {**ood[worst], "method": worst},
        "ood_minus_id_by_method": {m: d["mean"] for m, d in ood.items()},
        "id2_minus_id_best": {**id2[favourable], "method": favourable},
        "id2_minus_id_by_method": {m: d["mean"] for m, d in id2.items()},
        "best_synth_acc": {**synth[best], "method": best},
        "synth_acc_by_method": {m: s["mean"] for m, s in synth.items()},
        "oracle_synth_acc": stats.summarize(_per_seed(rows, "synth", "oracle_skeleton", "symbolic", "mean")),
    }


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, solved_targets = records["scores"], records["solved_targets"]
    solved = solved_targets[solved_targets["seed"] == records.seeds[0]]   # the same for every seed
    counts = rows[rows["method"] == "mean"].groupby(["seed", "category"]).size().unstack(fill_value=0)
    metrics = {"claims": _claims(rows), "results": _results(rows),
               "benchmark": {c: [int(v) for v in counts[c]] for c in counts.columns},
               "solved_targets": {law: list(targets) for law, targets in zip(solved["law"], solved["targets"])}}
    results = metrics["results"]
    plot = pd.DataFrame([{"x": f"{c}/{m}", "y": r["symbolic_accuracy"]["mean"], "series": "symbolic accuracy"}
                         for c, by_method in results.items() for m, r in by_method.items()]
                        + [{"x": f"{c}/{m}", "y": r["acc_tau_id"]["mean"], "series": "Acc_0.1 (ID)"}
                           for c, by_method in results.items() for m, r in by_method.items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "scores": rows}, figure=_figure(results),
                     setup=_setup(params, metrics), notes=_reading(rows, metrics))


def _figure(results: dict):
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    labels = [(c, m) for c, by_method in results.items() for m in by_method]
    x = np.arange(len(labels))
    for name, shift in (("symbolic_accuracy", -0.2), ("acc_tau_id", 0.0), ("acc_tau_ood", 0.2)):
        s = [results[c][m][name] for c, m in labels]
        mean = np.array([v["mean"] for v in s])
        err = np.array([[v["mean"] - v["ci_low"], v["ci_high"] - v["mean"]] for v in s]).T
        left.bar(x + shift, mean, width=0.2, yerr=err, label=name)
    left.set(xticks=x, ylabel="fraction of problems (mean over seeds)", title="accuracy by category / method")
    left.set_xticklabels([f"{c}/{m}" for c, m in labels], rotation=45, ha="right", fontsize=7)
    left.legend(fontsize=8)
    synth = results["synth"]
    names = list(synth)
    x = np.arange(len(names))
    for split, shift in (("id", -0.2), ("id2", 0.0), ("ood", 0.2)):
        right.bar(x + shift, [synth[m][f"log10_median_nmse_{split}"]["mean"] for m in names], width=0.2, label=split)
    right.set(xticks=x, ylabel=f"log10 median NMSE (floored at {NMSE_FLOOR:g})", title="LSR-Synth: ID vs OOD")
    right.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    b = m["benchmark"]
    return (
        f"Per seed: the first {p.n_laws} of 20 typed Feynman laws as original problems ({b.get('original')}), one "
        f"LSR-Transform rewrite per law whose target has exactly one sympy solution that reproduces the data "
        f"({b.get('transform')} per seed), and {p.synth_per_domain} LSR-Synth draws in each of 4 domains "
        f"({b.get('synth')}). Samples: {p.n_train} train, {p.n_test} ID test, {p.n_test} second ID test, {p.n_test} OOD "
        f"test (Feynman: inputs beyond the top of their range by up to {p.ood_stretch} of its width; ODEs: times after "
        f"{p.ood_time_fraction} of the horizon, {method.N_TRAJECTORIES} trajectories; materials: T beyond its range). "
        f"Searchers: gplearn SymbolicRegressor (population {p.gp_population}, {p.gp_generations} generations, "
        f"parsimony {p.gp_parsimony}); LLM-SR-style skeleton search ({p.search_iterations} skeletons, buffer "
        f"{p.search_buffer}, at most {p.search_max_terms} terms, explore {p.search_explore}); the memorizer of the 20 "
        f"original laws; the training mean; on LSR-Synth the oracle skeleton. Symbolic accuracy: SRBench's criterion "
        f"after rounding constants to {p.round_decimals} decimals; Acc_{p.tolerance:g}: max relative error; NMSE as "
        f"the official code. {p.seeds} seeds; intervals are 95% Student-t intervals over seeds. Setup decisions made before "
        f"the first run: NMSE floored at {NMSE_FLOOR:g} in the OOD comparison; gplearn sized for the time budget."
    )


def _reading(rows: pd.DataFrame, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (their reading is in NOTES.md)."""
    c = m["claims"]
    transform = rows[(rows["category"] == "transform") & (rows["method"] == "memorizer") & (rows["symbolic"] == 1)]
    solved = sorted(set(transform["problem"]))
    lines = [
        f"Memorizer: symbolic accuracy {c['memorizer_original_acc']['mean']:.2f} on the original laws, "
        f"{c['memorizer_transform_acc']['mean']:.2f} on their rewrites. Rewrites it still solves: "
        f"{', '.join(solved) or 'none'}.",
        f"LSR-Synth symbolic accuracy by method: "
        + ", ".join(f"{k} {v:.2f}" for k, v in c["synth_acc_by_method"].items())
        + f"; oracle skeleton {c['oracle_synth_acc']['mean']:.2f}.",
        "LSR-Transform symbolic accuracy by method: "
        + ", ".join(f"{k} {v['symbolic_accuracy']['mean']:.2f}" for k, v in m["results"]["transform"].items()) + ".",
        "LSR-Synth log10 median NMSE, OOD minus ID: " + ", ".join(f"{k} {v:+.2f}" for k, v in c["ood_minus_id_by_method"].items())
        + "; second ID minus ID: " + ", ".join(f"{k} {v:+.2f}" for k, v in c["id2_minus_id_by_method"].items()) + ".",
    ]
    return "\n\n".join(lines)
