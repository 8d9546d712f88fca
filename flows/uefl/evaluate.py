"""UEFL, the evaluation: accuracy and entropy gains over FedAvg, the ablation and the capacity-matched control,
UEFL's flags, the per-silo figure, from the per-seed records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.uefl import method
from flows.uefl.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt

METHODS = ("uefl", "uefl_no_extension", "uefl_least_uncertain", "fedavg", "fedprox", "fedper", "fedavg_homogeneous")
LABEL = {"uefl": "UEFL", "uefl_no_extension": "UEFL without extension (ablation)",
         "uefl_least_uncertain": "UEFL's extensions given to the least uncertain silos (control)", "fedavg": "FedAvg",
         "fedprox": "FedProx", "fedper": "FedPer (personal output layer)",
         "fedavg_homogeneous": "FedAvg, unshifted federation (control)"}
BASELINES = ("fedavg", "fedprox", "fedper")
SUMMARY_KEYS = ("acc_all", "acc_minority", "acc_majority", "acc_worst_silo", "entropy_all", "entropy_minority",
                "entropy_majority", "ece")


def _col(rows: pd.DataFrame, m: str, key: str) -> np.ndarray:
    return est.per_seed(rows, key, method=m)


def evaluate(params: Params, records: Records) -> RunOutput:
    summaries, silo_rows, log = records["methods"], records["silos"], records["uefl"]
    rows = summaries[["seed", "method", *SUMMARY_KEYS]]
    first = log[log["seed"] == records.seeds[0]].iloc[0]  # the parameter counts do not depend on the seed
    best = max(BASELINES, key=lambda m: _col(rows, m, "acc_all").mean())
    dists = method.silo_distributions(params)
    # the silos flagged at iteration 2, per seed (none when UEFL stopped after its first iteration)
    flags = np.array([list(flagged[0]) if len(flagged) else [0] * len(dists) for flagged in log["flagged"]],
                     dtype=float)
    minus = lambda a, b, key: est.paired(rows, key, {"method": a}, {"method": b})  # noqa: E731
    over = lambda a, b, key: est.ratio(rows, key, {"method": a}, {"method": b})  # noqa: E731
    metrics = {
        "premise": {m: stats.ratio_of_means(_col(rows, name, "entropy_minority"), _col(rows, name, "entropy_majority"))
                    for m, name in (("fedavg", "fedavg"), ("homogeneous", "fedavg_homogeneous"))},
        "gain": {"minority_acc": {"uefl": minus("uefl", "fedavg", "acc_minority"),
                                  "ablation": minus("uefl_no_extension", "fedavg", "acc_minority")},
                 "mean_acc": {"uefl": minus("uefl", "fedavg", "acc_all"),
                              "ablation": minus("uefl_no_extension", "fedavg", "acc_all")},
                 "extension_minority_acc": minus("uefl", "uefl_no_extension", "acc_minority"),
                 "least_uncertain_minority_acc": minus("uefl_least_uncertain", "uefl_no_extension", "acc_minority")},
        "entropy_ratio": {"uefl": over("uefl", "fedavg", "entropy_all"),
                          "ablation": over("uefl_no_extension", "fedavg", "entropy_all"),
                          "uefl_minority": over("uefl", "fedavg", "entropy_minority")},
        "vs_best_baseline": {"best": best,
                             "uefl": minus("uefl", best, "acc_all"),
                             "ablation": minus("uefl_no_extension", best, "acc_all")},
        "methods": {m: {k: stats.summarize(_col(rows, m, k)) for k in SUMMARY_KEYS} for m in METHODS},
        "per_silo": {m: {str(s): {k: float(g[k].mean()) for k in ("acc", "entropy", "ece")}
                         for s, g in silo_rows[silo_rows["method"] == m].groupby("silo")} for m in METHODS},
        "uefl": {"iterations": est.summary(log, "iterations"),
                 "rounds": est.summary(log, "rounds"),
                 "extended_any": float(np.mean([len(flagged) > 0 for flagged in log["flagged"]])),
                 "flag_rate_minority_iter2": float(flags[:, dists > 0].mean()),
                 "flag_rate_majority_iter2": float(flags[:, dists == 0].mean()),
                 "threshold": est.summary(log, "threshold")},
        "communication": {"uploads_per_method": {m: int(_col(summaries, m, "uploads").mean())
                                                 for m in ("uefl", *BASELINES)},
                          "parameters": {c.removeprefix("parameters_"): int(first[c])
                                         for c in log.columns if c.startswith("parameters_")}},
        "timings": {f"{m}_s": float(_col(summaries, m, "seconds").sum())
                    for m in ("uefl", "uefl_no_extension", "uefl_least_uncertain", *BASELINES)},
    }
    plot = (silo_rows.groupby(["method", "silo"], sort=False)["acc"].mean().reset_index()
            .rename(columns={"silo": "x", "acc": "y", "method": "series"}))
    return RunOutput(metrics=metrics, tables={"plot": plot[["x", "y", "series"]], "per_seed": rows,
                                               "per_silo": silo_rows},
                     figure=_figure(silo_rows, params), setup=_setup(params, metrics),
                     notes=_measured(params, metrics, log))


def _figure(silo_rows: pd.DataFrame, params: Params):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    n = len(method.silo_distributions(params))
    for m in METHODS:
        g = silo_rows[silo_rows["method"] == m].groupby("silo")[["acc", "entropy"]].mean()
        style = dict(marker="o", lw=2.2 if m == "uefl" else 1.2, ls="--" if m == "fedavg_homogeneous" else "-")
        axes[0].plot(g.index, g["acc"], label=LABEL[m], **style)
        axes[1].plot(g.index, g["entropy"], label=LABEL[m], **style)
    for ax, what in zip(axes, ("test accuracy (mean over seeds)", "MC-dropout predictive entropy (nats)")):
        ax.axvspan(params.silos_per_distribution[0] - 0.5, n - 0.5, color="0.9", zorder=0)
        ax.set(xlabel="silo (shaded: minority distributions)", ylabel=what, xticks=range(n))
    axes[0].legend(fontsize=7)
    fig.suptitle("UEFL vs baselines per silo")
    fig.tight_layout()
    return fig


def _interval(d: dict, key: str = "mean") -> str:
    return f"{fmt(d[key])} [{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]"


def _setup(p: Params, m: dict) -> str:
    return (
        f"{p.seeds} seeds; each a fresh iid split of scikit-learn's 1,797 digits into "
        f"{sum(p.silos_per_distribution)} equal silos ({'/'.join(map(str, p.silos_per_distribution))} silos of the "
        f"original / rotated 90 degrees + noise (strength {p.noise_strength}) / inverted + blurred distributions), "
        f"{1 - p.test_fraction:.0%} train / {p.test_fraction:.0%} test per silo. Model: conv({p.width})-GN-ReLU-pool, "
        f"conv({2 * p.width})-GN-ReLU-pool -> (2x2 positions of {2 * p.width} channels) -> extensible VQ "
        f"({p.num_codes} codes per codebook, commitment {p.commitment}, loss CE + {p.vq_weight} x VQ) -> MLP "
        f"({p.hidden} hidden, GELU, dropout {p.dropout} on the hidden layer and the logits). UEFL: {p.rounds} FedAvg "
        f"rounds with per-silo codebooks, then while the largest silo entropy exceeds (1 + {p.threshold_margin}) x "
        f"the iteration-1 mean: the silos above it get a new K-means-initialised codebook and {p.rounds_plus} more "
        f"rounds (at most {p.max_iterations} iterations). Local training: Adam lr {p.lr}, {p.local_epochs} epochs, "
        f"batch {p.batch_size}. Uncertainty: {p.mc_passes} dropout-on passes, entropy of the mean prediction, "
        f"averaged over a silo's test images; ECE with {p.ece_bins} bins. Baselines (shared tasks.federated.fedavg, "
        f"size-weighted): FedAvg, FedProx (mu {p.fedprox_mu}), FedPer (output layer kept per silo), all without "
        f"the VQ layer; the ablation is UEFL's loop with no silo ever flagged. Every method runs as many rounds as "
        f"UEFL did on that seed (mean {m['uefl']['rounds']['mean']:.1f})."
    )


def _measured(p: Params, m: dict, log: pd.DataFrame) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    meth = m["methods"]
    table = "\n".join(
        f"| {LABEL[k]} | {_interval(meth[k]['acc_all'])} | {_interval(meth[k]['acc_minority'])} | "
        f"{_interval(meth[k]['acc_majority'])} | {fmt(meth[k]['acc_worst_silo']['mean'])} | "
        f"{_interval(meth[k]['entropy_all'])} | {fmt(meth[k]['entropy_minority']['mean'])} / "
        f"{fmt(meth[k]['entropy_majority']['mean'])} | {_interval(meth[k]['ece'])} |" for k in METHODS)
    silos = "\n".join(
        f"| {LABEL[k]} | " + " | ".join(f"{fmt(v['acc'])} / {fmt(v['entropy'])} / {fmt(v['ece'])}"
                                        for v in m["per_silo"][k].values()) + " |" for k in METHODS)
    dists = method.silo_distributions(p)
    n = len(dists)
    u = m["uefl"]
    flagged = "; ".join(f"seed {seed}: " + (", ".join(
        f"iter {i + 2} flagged silos {[s for s, f in enumerate(fl) if f]}" for i, fl in enumerate(flags))
        or "no silo above the threshold") for seed, flags in zip(log["seed"], log["flagged"]))
    pr, g, e, vb = m["premise"], m["gain"], m["entropy_ratio"], m["vs_best_baseline"]
    params = m["communication"]["parameters"]
    return (
        "**Per method** (mean over seeds [95% CI]; accuracy and entropy are means of the per-silo values):\n\n"
        "| method | accuracy, all silos | minority silos | majority silos | worst silo | entropy (nats) | "
        "entropy minority / majority | ECE (all test images) |\n|---|---|---|---|---|---|---|---|\n" + table +
        "\n\n**Per silo** (accuracy / entropy / ECE, mean over seeds; silos "
        + ", ".join(f"{s}: {method.DISTRIBUTION_NAMES[int(d)]}" for s, d in enumerate(dists)) + "):\n\n"
        "| method | " + " | ".join(f"silo {s}" for s in range(n)) + " |\n|---|" + "---|" * n + "\n" + silos +
        f"\n\n**UEFL's iterations.** {fmt(u['iterations']['mean'])} iterations and {fmt(u['rounds']['mean'])} rounds "
        f"on average; a codebook was added in {u['extended_any']:.0%} of the seeds. At iteration 2 the rule flagged "
        f"{u['flag_rate_minority_iter2']:.0%} of the minority silos and {u['flag_rate_majority_iter2']:.0%} of the "
        f"majority silos ({flagged}).\n\n"
        f"**Premise.** FedAvg's entropy ratio minority / majority {_interval(pr['fedavg'], 'ratio')}; on the "
        f"unshifted twin federation (the control) {_interval(pr['homogeneous'], 'ratio')}.\n\n"
        f"**Accuracy.** UEFL - FedAvg on the minority silos {_interval(g['minority_acc']['uefl'])}, over all silos "
        f"{_interval(g['mean_acc']['uefl'])}; the ablation (no extension) - FedAvg: "
        f"{_interval(g['minority_acc']['ablation'])} and {_interval(g['mean_acc']['ablation'])}; UEFL - ablation on "
        f"the minority silos {_interval(g['extension_minority_acc'])}; the same number of extensions given to the "
        f"least uncertain silos - ablation {_interval(g['least_uncertain_minority_acc'])} (capacity-matched control). "
        f"Best baseline: {LABEL[vb['best']]}; UEFL - it {_interval(vb['uefl'])}, ablation - it "
        f"{_interval(vb['ablation'])}.\n\n"
        f"**Uncertainty.** Entropy UEFL / FedAvg {_interval(e['uefl'], 'ratio')} (minority silos "
        f"{_interval(e['uefl_minority'], 'ratio')}); ablation / FedAvg {_interval(e['ablation'], 'ratio')}.\n\n"
        f"**Communication.** Uploads per run: {m['communication']['uploads_per_method']}; FedAvg's model has "
        f"{params['fedavg']} parameters, UEFL's shared part {params['uefl_shared']}, plus "
        f"{params['uefl_codebook_per_book']} per codebook kept on each silo."
    )
