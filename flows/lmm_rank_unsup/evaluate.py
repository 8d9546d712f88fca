"""Ranked from Within, the evaluation: every ranker's rho and tau per target, the claim metrics (NLL against the
proxy benchmark and the other softmax signals, the permuted control), the within-family diagnostic, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.lmm_rank_unsup import method
from flows.lmm_rank_unsup.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records


def _per_seed(rankings: pd.DataFrame, ranker: str, targets: list[str], value: str = "rho") -> np.ndarray:
    """``value`` of ``ranker`` per seed and target, shape (n_seeds, n_targets), C-ordered: NumPy sums a row of a
    transposed view in another order, which would move the last bits of every mean over targets."""
    return np.ascontiguousarray(est.by_setting(rankings, value, "target", targets, ranker=ranker).T)


def _clean_accuracy_range(models: pd.DataFrame) -> list[float]:
    """Per seed (seed order): the best model's accuracy on the clean target minus the worst's."""
    clean = models[models["target"] == "clean"]
    return [float(np.ptp(clean.loc[clean["seed"] == seed, "accuracy"])) for seed in sorted(set(clean["seed"]))]


def _claims(rankings: pd.DataFrame, models: pd.DataFrame, p: Params) -> dict:
    targets, shifted = list(p.targets), [t for t in p.targets if t != "clean"]
    rho = {r: _per_seed(rankings, r, targets) for r in method.RANKERS}
    on_shifted = np.array([t != "clean" for t in targets])
    stds = {r: rho[r].std(axis=1, ddof=1) for r in (*method.SOFTMAX_SIGNALS, method.CONTROL)}
    best_other_std = np.min([stds[s] for s in method.SOFTMAX_SIGNALS if s != "nll"], axis=0)
    clean = targets.index("clean")
    return {
        "nll_mean_rho": stats.summarize(rho["nll"].mean(axis=1)),
        "nll_rho_by_target": dict(zip(targets, rho["nll"].mean(axis=0).tolist())),
        "permuted_mean_rho": stats.summarize(rho[method.CONTROL].mean(axis=1)),
        "nll_minus_proxy_shifted": stats.paired_difference(rho["nll"][:, on_shifted].mean(axis=1),
                                                           rho[method.BASELINE][:, on_shifted].mean(axis=1)),
        "nll_minus_proxy_by_target": dict(zip(shifted, (rho["nll"] - rho[method.BASELINE])[:, on_shifted].mean(axis=0).tolist())),
        "permuted_minus_proxy_shifted": stats.paired_difference(rho[method.CONTROL][:, on_shifted].mean(axis=1),
                                                                rho[method.BASELINE][:, on_shifted].mean(axis=1)),
        "nll_std_minus_best_other": stats.summarize(stds["nll"] - best_other_std),
        "nll_std_minus_other_by_signal": {s: float((stds["nll"] - stds[s]).mean()) for s in method.SOFTMAX_SIGNALS if s != "nll"},
        "permuted_std_minus_best_other": stats.summarize(stds[method.CONTROL] - best_other_std),
        "proxy_clean_rho": stats.summarize(rho[method.BASELINE][:, clean]),
        "clean_accuracy_range": stats.summarize(_clean_accuracy_range(models)),
    }


def _ranker_metrics(rankings: pd.DataFrame, p: Params) -> dict:
    """Per ranker: rho and tau per target (mean over seeds), mean rho over all / shifted targets with intervals,
    and the std of rho across targets."""
    targets = list(p.targets)
    shifted = [i for i, t in enumerate(targets) if t != "clean"]
    out = {}
    for r in method.RANKERS:
        rho = _per_seed(rankings, r, targets)
        tau = _per_seed(rankings, r, targets, "tau")
        out[r] = {"rho_by_target": dict(zip(targets, rho.mean(axis=0).tolist())),
                  "tau_by_target": dict(zip(targets, tau.mean(axis=0).tolist())),
                  "mean_rho": stats.summarize(rho.mean(axis=1)), "mean_rho_shifted": stats.summarize(rho[:, shifted].mean(axis=1)),
                  "mean_tau": stats.summarize(tau.mean(axis=1)), "rho_std_across_targets": float(rho.std(axis=1, ddof=1).mean())}
    return out


def _within_subsets(models: pd.DataFrame, p: Params) -> dict:
    """Post-hoc diagnostic: mean rho (over seeds and targets) of every signal and the proxy when the zoo is cut
    to one family (of at least 3 members), or to the cross-entropy-trained networks (mlp + cnn); means over the
    defined rhos (a constant side gives none); plus the subset's mean accuracy and max softmax on the clean target."""
    subsets = {f: [f] for f in dict.fromkeys(m.family for m in p.zoo)} | {"mlp+cnn": ["mlp", "cnn"]}
    out = {}
    for name, families in subsets.items():
        rows = models[models["family"].isin(families)]
        if rows["model"].nunique() < 3:
            continue
        rho = {r: [method.rank_correlation(g[r].to_numpy(), g["accuracy"].to_numpy())[0]
                   for _, g in rows.groupby(["seed", "target"], sort=False)] for r in (*method.SIGNALS, method.BASELINE)}
        clean = rows[rows["target"] == "clean"]
        out[name] = {"models": int(rows["model"].nunique()), **{r: float(np.nanmean(v)) for r, v in rho.items()},
                     "clean_accuracy": float(clean["accuracy"].mean()), "clean_max_softmax": float(clean["max_softmax"].mean())}
    return out


def evaluate(params: Params, records: Records) -> RunOutput:
    models, rankings = records["model_scores"], records["rankings"]
    rankers = _ranker_metrics(rankings, params)
    accuracy = models.groupby(["target", "model"], sort=False)["accuracy"].mean().unstack("target")[list(params.targets)]
    metrics = {"claims": _claims(rankings, models, params), "rankers": rankers, "within_subsets": _within_subsets(models, params),
               "zoo_accuracy_by_target": {t: {"min": float(accuracy[t].min()), "median": float(accuracy[t].median()),
                                              "max": float(accuracy[t].max())} for t in params.targets}}
    plot = pd.DataFrame([{"x": t, "y": v, "series": r} for r in method.RANKERS for t, v in rankers[r]["rho_by_target"].items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "model_scores": models},
                     figure=_figure(rankers, models, params), setup=_setup(params), notes=_measured(metrics, accuracy))


def _figure(rankers: dict, models: pd.DataFrame, p: Params):
    targets = list(p.targets)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    for r in method.RANKERS:
        style = "k--" if r == method.BASELINE else ("x:" if r == method.CONTROL else "o-")
        left.plot(targets, [rankers[r]["rho_by_target"][t] for t in targets], style, label=r)
    left.axhline(0.7, color="grey", lw=0.8)
    left.set(ylabel="Spearman rho (score vs true accuracy), mean over seeds", title="ranking quality per target")
    left.tick_params(axis="x", rotation=45)
    left.legend(fontsize=7)
    first = models[(models["seed"] == models["seed"].min()) & (models["target"] == "clean")]
    for family, rows in first.groupby("family", sort=False):
        right.plot(rows["nll"], rows["accuracy"], "o", ms=5, label=family)
    right.set(xlabel="NLL score: mean log-prob of the predicted answer", ylabel="true accuracy",
              title="the zoo on the clean target, by family (first seed)")
    right.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    families = pd.Series([m.family for m in p.zoo]).value_counts().to_dict()
    return (f"Zoo of {len(p.zoo)} digit classifiers ({', '.join(f'{n} {f}' for f, n in families.items())}), trained per seed "
            f"on the {1 - p.target_share - p.proxy_share:.0%} training split of scikit-learn's 8x8 digits, with their own "
            f"label noise (0-30%), training fraction (5-100%), capacity and epochs (Adam, lr {p.learning_rate}, batch "
            f"{p.batch_size}); temperatures untuned. Unlabeled targets ({len(p.targets)}) from the {p.target_share:.0%} "
            f"target pool: {', '.join(p.targets)} (noise_s: Gaussian pixel noise of std s x the ink range; rotation "
            f"uniform in +-{p.rotate_degrees:g} deg; one {p.occlusion_size}x{p.occlusion_size} square blanked; inversion "
            f"16 - x; 1-pixel shift + noise {p.shift_noise:g}). Signals per model = mean over the target of: log-prob of "
            f"the predicted class (NLL score), max softmax, minus entropy, top-2 margin, self-consistency of "
            f"{p.consistency_samples} answers sampled from the softmax, agreement under {p.tta_samples} noisy copies "
            f"(std {p.tta_noise:g}). Comparator: accuracy on the labeled clean proxy split ({p.proxy_share:.0%}). Each "
            f"ranker is scored per target by Spearman rho and Kendall tau against the true accuracies; intervals are "
            f"95% Student-t intervals over {p.seeds} seeds (each seed: a new split, zoo and targets).")


def _measured(m: dict, accuracy: pd.DataFrame) -> str:
    """The measured numbers, for the notes (how to read them is in NOTES.md)."""
    r, c = m["rankers"], m["claims"]
    fmt = lambda s: f"{s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
    lines = ["Mean rho over all targets / over the shifted targets / mean Kendall tau / std of rho across targets, per "
             "ranker: " + "; ".join(f"{k}: {fmt(v['mean_rho'])} / {fmt(v['mean_rho_shifted'])} / {v['mean_tau']['mean']:.3f}"
                                   f" / {v['rho_std_across_targets']:.3f}" for k, v in r.items()) + ".",
             "NLL rho per target: " + ", ".join(f"{t} {v:.2f}" for t, v in c["nll_rho_by_target"].items())
             + "; proxy rho per target: " + ", ".join(f"{t} {v:.2f}" for t, v in r[method.BASELINE]["rho_by_target"].items()) + ".",
             "Zoo accuracy per target (min / median / max over models, mean over seeds): "
             + "; ".join(f"{t} {v['min']:.2f} / {v['median']:.2f} / {v['max']:.2f}" for t, v in m["zoo_accuracy_by_target"].items())
             + ".",
             f"Best model on the clean target: {accuracy['clean'].idxmax()}; worst: {accuracy['clean'].idxmin()}.",
             "Post-hoc diagnostic (not a claim): mean rho over seeds and targets "
             "when the zoo is cut to one family or to the cross-entropy-trained networks (mlp + cnn), per signal: "
             + "; ".join(f"{name} ({v['models']} models): " + ", ".join(f"{r} {v[r]:.2f}" for r in (*method.SIGNALS, method.BASELINE))
                         for name, v in m["within_subsets"].items())
             + ". Per family on the clean target, mean accuracy / mean max softmax: "
             + "; ".join(f"{name} {v['clean_accuracy']:.2f} / {v['clean_max_softmax']:.2f}" for name, v in m["within_subsets"].items())
             + "."]
    return "\n\n".join(lines)
