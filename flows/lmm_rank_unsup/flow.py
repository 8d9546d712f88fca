"""Ranked from Within as a Prefect flow: label-free ranking signals of a zoo of small digit classifiers on
unlabeled shifted digit targets, scored by the rank correlation with the models' true accuracy."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.lmm_rank_unsup import method
from flows.lmm_rank_unsup.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

PERMUTED = ("NLL score with the model identities permuted (per target and seed): the same rho metric on a ranking "
            "that carries no information about the models")

PAPER = Paper(
    slug="lmm_rank_unsup",
    title="Ranked from Within: Ranking Large Multimodal Models Without Labels",
    method="uncertainty-based unsupervised model ranking (softmax NLL / max-prob / entropy / margin, self-consistency; "
           "Spearman and Kendall against the true accuracy ranking)",
    paper_class="C",
    source="abstracts-003.txt #7",
    official_code=None,
    claims=(
        Claim(id="nll_ranks_models_without_labels",
              text=("uncertainty scores derived from softmax distributions provide a robust and consistent basis for ranking "
                    "models across various tasks (reported Spearman rho ~ 0.92) -- here: Spearman rho between the zoo's mean "
                    "NLL score (mean log-probability of its predicted answer) and its true accuracy, averaged over the 8 "
                    "unlabeled targets, >= 0.7"),
              source="abstract; plan claim 1 (papernotes: rho ~ 0.92)", metric="claims.nll_mean_rho.mean",
              comparison=">=", threshold=0.7, kind="magnitude", role="claim", interval=ci("claims.nll_mean_rho"),
              per_setting="claims.nll_rho_by_target",
              scaled="0.92 -> 0.7: a 24-model zoo of small classifiers is far less diverse than 47 LMMs (the plan's figure)",
              control=Control(name=PERMUTED, metric="claims.permuted_mean_rho.mean", interval=ci("claims.permuted_mean_rho"))),
        Claim(id="ranking_from_within_beats_proxy_benchmark",
              text=("facilitates the ranking of LMMs on unlabeled data ... for diverse target domains -- on the shifted "
                    "targets (all but clean), mean rho of the NLL score minus mean rho of the paper's comparator, the "
                    "ranking by accuracy on a labeled other benchmark (the clean proxy set), > 0"),
              source="abstract; plan claim 2", metric="claims.nll_minus_proxy_shifted.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.nll_minus_proxy_shifted"),
              per_setting="claims.nll_minus_proxy_by_target",
              control=Control(name=f"{PERMUTED}, minus the proxy", metric="claims.permuted_minus_proxy_shifted.mean",
                              interval=ci("claims.permuted_minus_proxy_shifted"))),
        Claim(id="nll_is_the_most_consistent_softmax_signal",
              text=("a robust and consistent basis (papernotes: NLL-based uncertainty is the most stable) -- the standard "
                    "deviation of rho across the 8 targets is lower for NLL than for every other softmax signal (max "
                    "softmax, entropy, margin): std(NLL) - min std(others) < 0"),
              source="abstract; plan claim 3", metric="claims.nll_std_minus_best_other.mean", comparison="<",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.nll_std_minus_best_other"),
              per_setting="claims.nll_std_minus_other_by_signal",
              control=Control(name=f"{PERMUTED}: its rho's std across targets minus the best softmax signal's",
                              metric="claims.permuted_std_minus_best_other.mean",
                              interval=ci("claims.permuted_std_minus_best_other"))),
        Claim(id="proxy_ranks_the_clean_target",
              text=("the comparator works where it should: accuracy on the labeled clean proxy set ranks the zoo on the "
                    "clean target (same distribution, disjoint images) with rho > 0.8; checks the split and the metric"),
              source="our pipeline", metric="claims.proxy_clean_rho.mean", comparison=">", threshold=0.8,
              kind="magnitude", role="sanity", interval=ci("claims.proxy_clean_rho")),
        Claim(id="zoo_is_diverse",
              text=("the zoo spans a wide range of quality, so that a ranking is meaningful: on the clean target the best "
                    "model's accuracy minus the worst's > 0.2"),
              source="plan (a genuinely diverse zoo)", metric="claims.clean_accuracy_range.mean", comparison=">",
              threshold=0.2, kind="magnitude", role="sanity", interval=ci("claims.clean_accuracy_range")),
    ),
    limitations=(
        "What the stand-in cannot show: whether pretrained LMMs' token softmax tracks their VQA accuracy, or anything "
        "about the 47 x 9 results. The 'LMMs' are 24 small digit classifiers trained here (logistic regression, MLPs, "
        "a small CNN, a kNN with a softmax over class distances) that differ in family, capacity, epochs, label noise "
        "and training data; their softmax scales differ by family as the untuned temperatures leave them, whereas LMMs "
        "share one decoding head design. The 'benchmarks' are 8 corruptions of held-out digits, not VQA tasks; the "
        "answer is one class, so the paper's token-position question (first answer token vs all tokens) and "
        "generation-level NLL are not exercised (the plan's optional two-token variant is not built). Self-consistency "
        "samples from the class softmax, not from a decoder."
    ),
)


def _per_seed(runs: list[dict], ranker: str, targets: list[str]) -> np.ndarray:
    """rho of ``ranker`` per seed and target, shape (n_seeds, n_targets)."""
    return np.array([[r["rho"][ranker][t] for t in targets] for r in runs])


def _claims(runs: list[dict], p: Params) -> dict:
    targets, shifted = list(p.targets), [t for t in p.targets if t != "clean"]
    rho = {r: _per_seed(runs, r, targets) for r in method.RANKERS}
    on_shifted = np.array([t != "clean" for t in targets])
    stds = {r: rho[r].std(axis=1, ddof=1) for r in (*method.SOFTMAX_SIGNALS, method.CONTROL)}
    best_other_std = np.min([stds[s] for s in method.SOFTMAX_SIGNALS if s != "nll"], axis=0)
    clean = targets.index("clean")
    accuracy_range = [np.ptp([m["accuracy"] for m in r["models"] if m["target"] == "clean"]) for r in runs]
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
        "clean_accuracy_range": stats.summarize(accuracy_range),
    }


def _ranker_metrics(runs: list[dict], p: Params) -> dict:
    """Per ranker: rho and tau per target (mean over seeds), mean rho over all / shifted targets with intervals,
    and the std of rho across targets."""
    targets = list(p.targets)
    shifted = [i for i, t in enumerate(targets) if t != "clean"]
    out = {}
    for r in method.RANKERS:
        rho = _per_seed(runs, r, targets)
        tau = np.array([[run["tau"][r][t] for t in targets] for run in runs])
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


@paper_flow(PAPER, Params, smoke=SMOKE)
def lmm_rank_unsup_flow(params: Params, ctx: RunContext) -> RunOutput:
    with threadpool_limits(limits=1):  # one BLAS thread per task: the seeds are the parallelism
        runs = sorted(over_seeds(method.run_seed, ctx.seeds, p=params), key=lambda r: r["seed"])
    models = pd.DataFrame([row for r in runs for row in r["models"]])
    save_parquet(models, ctx.data_dir / "model_scores.parquet")
    rankers = _ranker_metrics(runs, params)
    accuracy = models.groupby(["target", "model"], sort=False)["accuracy"].mean().unstack("target")[list(params.targets)]
    metrics = {"claims": _claims(runs, params), "rankers": rankers, "within_subsets": _within_subsets(models, params),
               "zoo_accuracy_by_target": {t: {"min": float(accuracy[t].min()), "median": float(accuracy[t].median()),
                                              "max": float(accuracy[t].max())} for t in params.targets}}
    plot = pd.DataFrame([{"x": t, "y": v, "series": r} for r in method.RANKERS for t, v in rankers[r]["rho_by_target"].items()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "model_scores": models},
                     figure=_figure(rankers, models, params), setup=_setup(params), notes=_notes(metrics, accuracy))


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
            f"95% bootstraps over {p.seeds} seeds (each seed: a new split, zoo and targets).")


def _notes(m: dict, accuracy: pd.DataFrame) -> str:
    r, c = m["rankers"], m["claims"]
    fmt = lambda s: f"{s['mean']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
    lines = ["Mean rho over all targets / over the shifted targets / mean Kendall tau / std of rho across targets, per "
             "ranker: " + "; ".join(f"{k}: {fmt(v['mean_rho'])} / {fmt(v['mean_rho_shifted'])} / {v['mean_tau']['mean']:.3f}"
                                   f" / {v['rho_std_across_targets']:.3f}" for k, v in r.items()) + ".",
             "NLL rho per target: " + ", ".join(f"{t} {v:.2f}" for t, v in c["nll_rho_by_target"].items())
             + "; proxy rho per target: " + ", ".join(f"{t} {v:.2f}" for t, v in r[method.BASELINE]["rho_by_target"].items()) + ".",
             "Zoo accuracy per target (min / median / max over models, mean over seeds): "
             + "; ".join(f"{t} {v['min']:.2f} / {v['median']:.2f} / {v['max']:.2f}" for t, v in m["zoo_accuracy_by_target"].items())
             + ". A target where every model is near chance (inversion) has no ranking to recover: its rho is noise "
             "for every ranker.",
             f"Best model on the clean target: {accuracy['clean'].idxmax()}; worst: {accuracy['clean'].idxmin()}.",
             "Post-hoc diagnostic, added after seeing the verdicts and not a claim: mean rho over seeds and targets "
             "when the zoo is cut to one family or to the cross-entropy-trained networks (mlp + cnn), per signal: "
             + "; ".join(f"{name} ({v['models']} models): " + ", ".join(f"{r} {v[r]:.2f}" for r in (*method.SIGNALS, method.BASELINE))
                         for name, v in m["within_subsets"].items())
             + ". Per family on the clean target, mean accuracy / mean max softmax: "
             + "; ".join(f"{name} {v['clean_accuracy']:.2f} / {v['clean_max_softmax']:.2f}" for name, v in m["within_subsets"].items())
             + "."]
    return "\n\n".join(lines)
