"""MRMC (reconstructed), the evaluation: paired accuracy differences over seeds and pools at each core-set size,
the selection timing, what the contribution ranks by, the figure and the measured numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.mrmc_coreset import method
from flows.mrmc_coreset.claims import ratio_key
from flows.mrmc_coreset.method import BASELINES, LABEL, METHODS
from flows.mrmc_coreset.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, diagnostics, timing = records["per_seed"], records["diagnostics"], records["timing"]
    metrics = _metrics(rows, timing, params)
    metrics["contribution_ranks_by"] = {d: {c: stats.summarize(g[c].to_numpy()) for c in
                                            ("spearman_c_initial_loss", "spearman_c_minus_early_loss")}
                                        for d, g in diagnostics.groupby("dataset", sort=False)}
    plot = _plot(metrics, params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": rows, "timing": timing.drop(columns="seed")},
                     figure=_figure(plot, params), setup=_setup(params, rows), notes=_measured(metrics, params))


def _paired_over_pools(rows: pd.DataFrame, datasets: list[str], a: str | dict[str, str], b: str | dict[str, str],
                       ratio: float) -> tuple[dict, dict[str, float]]:
    """Paired summary over seeds of mean_d [acc(a, d) - acc(b, d)] and each pool's mean difference;
    ``a``/``b`` name a method, or one per pool."""
    pick = lambda m, d: m[d] if isinstance(m, dict) else m  # noqa: E731
    diffs = np.stack([np.subtract(*est.aligned(rows, "accuracy", {"dataset": d, "method": pick(a, d), "ratio": ratio},
                                               {"dataset": d, "method": pick(b, d), "ratio": ratio}))
                      for d in datasets])
    return stats.summarize(diffs.mean(axis=0)), {d: float(x.mean()) for d, x in zip(datasets, diffs)}


def _metrics(rows: pd.DataFrame, timing: pd.DataFrame, params: Params) -> dict:
    datasets = list(params.datasets)
    accuracy = {d: {m: {ratio_key(r): est.summary(rows, "accuracy", dataset=d, method=m, ratio=r)
                        for r in (params.ratios if m != "full" else [1.0])}
                    for m in (*METHODS, "full")} for d in datasets}
    out: dict = {"accuracy": accuracy, "claim1": {}, "claim1_control": {}, "claim2": {}, "claim2_control": {},
                 "best_baseline": {}}
    for r in params.ratios:
        key = ratio_key(r)
        out["claim1"][key], out["claim1"][f"{key}_by_dataset"] = _paired_over_pools(rows, datasets, "mrmc", "random", r)
        out["claim1_control"][key], out["claim1_control"][f"{key}_by_dataset"] = _paired_over_pools(
            rows, datasets, "balanced_random", "random", r)
        best = {d: max(BASELINES, key=lambda m: accuracy[d][m][key]["mean"]) for d in datasets}
        out["best_baseline"][key] = best
        out["claim2"][key], out["claim2"][f"{key}_by_dataset"] = _paired_over_pools(rows, datasets, "mrmc", best, r)
        out["claim2_control"][key], out["claim2_control"][f"{key}_by_dataset"] = _paired_over_pools(
            rows, datasets, "random", best, r)
        for variant in ("mrmc_strata", "mrmc_noquota", "mrmc_from_epoch1"):
            out.setdefault(f"{variant}_minus_random", {})[key] = _paired_over_pools(rows, datasets, variant, "random", r)[0]
    spread = rows[rows["method"] != "full"].groupby(["seed", "dataset", "ratio"])["samples_seen"].agg(np.ptp)
    sizes_ok = rows[rows["method"] != "full"].groupby(["seed", "dataset", "ratio"])["k"].agg(np.ptp)
    out["sanity"] = {"samples_seen_spread": float(spread.max()), "k_spread": float(sizes_ok.max())}
    seconds = {s: timing[timing["scorer"] == s].sort_values("repeat")["seconds"].to_numpy() for s in timing["scorer"].unique()}
    out["timings"] = {"scoring": {
        "mrmc_over_forgetting": stats.ratio_of_means(seconds["mrmc"], seconds["forgetting"]),
        "aa_control": stats.ratio_of_means(seconds["forgetting_again"], seconds["forgetting"]),
        **{f"{s}_s": stats.summarize(v) for s, v in seconds.items()}}}
    out["scoring_epochs"] = {"mrmc": params.early_epochs, "el2n": params.early_epochs, "herding": params.early_epochs,
                             "forgetting": params.full_epochs, "mrmc_over_forgetting": params.early_epochs / params.full_epochs}
    return out


def _plot(metrics: dict, params: Params) -> pd.DataFrame:
    out = []
    for d in params.datasets:
        for m in METHODS:
            for r in params.ratios:
                s = metrics["accuracy"][d][m][ratio_key(r)]
                out.append({"x": r, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"],
                            "series": f"{d}:{m}", "dataset": d, "method": m})
        s = metrics["accuracy"][d]["full"]["r100"]
        out.append({"x": 1.0, "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": f"{d}:full",
                    "dataset": d, "method": "full"})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(1, len(params.datasets), figsize=(6.4 * len(params.datasets), 4.6), squeeze=False)
    style = {"mrmc": ("C3", "o", 2.2), "mrmc_strata": ("C3", "s", 1.0), "mrmc_noquota": ("C3", "^", 1.0),
             "random": ("k", "x", 1.5), "balanced_random": ("0.5", "x", 1.0), "herding": ("C0", "D", 1.2),
             "forgetting": ("C2", "v", 1.2), "el2n": ("C1", "P", 1.2), "kcenter": ("C4", "*", 0.8),
             "high_loss": ("C5", "h", 0.8), "mrmc_from_epoch1": ("C3", "d", 0.8)}
    for ax, d in zip(axes[0], params.datasets):
        g = plot[plot["dataset"] == d]
        for m, (colour, marker, width) in style.items():
            s = g[g["method"] == m].sort_values("x")
            ax.errorbar(s["x"], s["y"], yerr=[s["y"] - s["y_low"], s["y_high"] - s["y"]], color=colour, marker=marker,
                        lw=width, capsize=3, label=LABEL[m], ls="--" if m in ("mrmc_strata", "mrmc_noquota") else ":" if m in method.EXTRA_METHODS else "-")
        full = g[g["method"] == "full"]
        ax.axhline(float(full["y"].iloc[0]), color="k", ls=":", lw=1, label="full data")
        ax.set(xlabel="core-set size (fraction of the pool)", ylabel="test accuracy (mean, 95% CI)", title=d)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(params: Params, rows: pd.DataFrame) -> str:
    n_pool = rows[rows["method"] == "full"].groupby("dataset")["k"].first().to_dict()
    return (
        f"**Data.** {', '.join(f'{d} ({n} pool rows)' for d, n in n_pool.items())}; a stratified "
        f"{1 - params.test_fraction:.0%}/{params.test_fraction:.0%} pool/test split per seed, features standardised "
        f"with the pool's statistics. make_classification: {params.synthetic_n} points, {params.synthetic_features} "
        f"features ({params.synthetic_informative} informative), 10 classes, flip_y = {params.synthetic_flip} "
        f"(label noise), class_sep = {params.synthetic_class_sep}. {params.seeds} seeds (a fresh split, data set and "
        "initialisation per seed).\n\n"
        f"**Models.** MLP {params.hidden} (ReLU), Adam lr = {params.lr}, batch {params.batch_size}, the toolkit's "
        "`train_with_selection`. Proxy: the full pool for "
        f"{params.full_epochs} epochs with per-sample loss, EL2N and correctness recorded at every epoch. Final "
        f"models: from the same initialisation per seed, {params.train_epochs} epochs on the core-set only "
        f"(equal size = equal samples seen); core-sets of {', '.join(f'{r:.0%}' for r in params.ratios)} of the pool.\n\n"
        f"**Methods.** MRMC (reconstructed): c_i = sum over t < {params.early_epochs} of l_i(t)^2 - l_i(t+1)^2 "
        "(l_i(0) at initialisation), the top-c_i samples within per-class quotas proportional to class frequency. "
        f"Variants: MRMC-strata (equal shares from {params.n_strata} quantile strata of c_i, random within) and "
        "MRMC-noquota (global top-c_i). Baselines: Random; class-balanced random (the control); Herding "
        f"(per class, on the penultimate layer of the proxy after {params.early_epochs} epochs); Forgetting "
        f"(events over all {params.full_epochs} proxy epochs, never-learned samples count {params.full_epochs}); "
        f"EL2N (after {params.early_epochs} epochs). Reported only (added after the first default run, in no claim): "
        "K-center greedy on the same embedding as Herding, high-loss top-k after "
        f"{params.early_epochs} epochs. Ties broken at random. Full data: {params.full_epochs} epochs "
        "on the whole pool (reference).\n\n"
        f"**Cost.** MRMC's and Forgetting's selections timed on {params.timing_dataset} at 30%, one thread, "
        f"{params.timing_repeats} interleaved repeats (MRMC, Forgetting, Forgetting again; the order rotates with the "
        "repeat), after the seeds, "
        "one untimed warm-up call each."
    )


def _measured(metrics: dict, params: Params) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    acc = metrics["accuracy"]
    def cell(d, m, r):
        s = acc[d][m][ratio_key(r)] if m != "full" else acc[d]["full"]["r100"]
        return f"{s['mean']:.3f}"
    table = ["| pool | method | " + " | ".join(f"{r:.0%}" for r in params.ratios) + " |",
             "|---|---|" + "---|" * len(params.ratios)]
    for d in params.datasets:
        for m in METHODS:
            table.append(f"| {d} | {LABEL[m]} | " + " | ".join(cell(d, m, r) for r in params.ratios) + " |")
        table.append(f"| {d} | full data ({acc[d]['full']['r100']['n']} seeds) | {cell(d, 'full', 1.0)} (whole pool) |"
                     + " |" * (len(params.ratios) - 1))
    t = metrics["timings"]["scoring"]
    lines = []
    for r in params.ratios:
        key = ratio_key(r)
        c1, c1c, c2, c2c = (metrics[n][key] for n in ("claim1", "claim1_control", "claim2", "claim2_control"))
        best = ", ".join(f"{d}: {m}" for d, m in metrics["best_baseline"][key].items())
        lines.append(
            f"- {r:.0%}: MRMC - random {100 * c1['mean']:+.2f} pp [{100 * c1['ci_low']:+.2f}, {100 * c1['ci_high']:+.2f}] "
            f"(by pool: {', '.join(f'{d} {100 * v:+.2f}' for d, v in metrics['claim1'][f'{key}_by_dataset'].items())}); "
            f"balanced random - random {100 * c1c['mean']:+.2f} pp; best baseline ({best}); MRMC - best "
            f"{100 * c2['mean']:+.2f} pp [{100 * c2['ci_low']:+.2f}, {100 * c2['ci_high']:+.2f}] "
            f"(by pool: {', '.join(f'{d} {100 * v:+.2f}' for d, v in metrics['claim2'][f'{key}_by_dataset'].items())}); "
            f"random - best {100 * c2c['mean']:+.2f} pp; MRMC-strata - random "
            f"{100 * metrics['mrmc_strata_minus_random'][key]['mean']:+.2f} pp; MRMC-noquota - random "
            f"{100 * metrics['mrmc_noquota_minus_random'][key]['mean']:+.2f} pp; MRMC from epoch 1 - random "
            f"{100 * metrics['mrmc_from_epoch1_minus_random'][key]['mean']:+.2f} pp "
            f"[{100 * metrics['mrmc_from_epoch1_minus_random'][key]['ci_low']:+.2f}, "
            f"{100 * metrics['mrmc_from_epoch1_minus_random'][key]['ci_high']:+.2f}].")
    ranks = ", ".join(f"{d}: {v['spearman_c_initial_loss']['mean']:+.2f} with the loss at initialisation, "
                      f"{v['spearman_c_minus_early_loss']['mean']:+.2f} with minus the loss after "
                      f"{params.early_epochs} epochs" for d, v in metrics["contribution_ranks_by"].items())
    return (
        "**Accuracy (mean over seeds).**\n\n" + "\n".join(table) + "\n\n**Per ratio.**\n" + "\n".join(lines) + "\n\n"
        f"**Cost.** Selection wall time: MRMC {t['mrmc_s']['mean']:.3f} s, Forgetting {t['forgetting_s']['mean']:.3f} s "
        f"(ratio {t['mrmc_over_forgetting']['ratio']:.3f} [{t['mrmc_over_forgetting']['ci_low']:.3f}, "
        f"{t['mrmc_over_forgetting']['ci_high']:.3f}]); A/A control {t['aa_control']['ratio']:.3f} "
        f"[{t['aa_control']['ci_low']:.3f}, {t['aa_control']['ci_high']:.3f}]. Exact proxy epochs: MRMC, EL2N and "
        f"Herding {params.early_epochs}, Forgetting {params.full_epochs} (ratio "
        f"{params.early_epochs / params.full_epochs:.3f}).\n\n"
        f"**What the contribution ranks by** (Spearman over the pool, mean over seeds): {ranks}."
    )
