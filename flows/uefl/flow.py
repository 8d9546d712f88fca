"""UEFL as a Prefect flow: uncertainty-driven extensible codebooks against FedAvg, FedProx, FedPer and the
no-extension ablation, on digit silos with two minority feature shifts."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from flows.uefl import method
from flows.uefl.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow

METHODS = ("uefl", "uefl_no_extension", "uefl_least_uncertain", "fedavg", "fedprox", "fedper", "fedavg_homogeneous")
LABEL = {"uefl": "UEFL", "uefl_no_extension": "UEFL without extension (ablation)",
         "uefl_least_uncertain": "UEFL's extensions given to the least uncertain silos (control)", "fedavg": "FedAvg",
         "fedprox": "FedProx", "fedper": "FedPer (personal output layer)",
         "fedavg_homogeneous": "FedAvg, unshifted federation (control)"}
BASELINES = ("fedavg", "fedprox", "fedper")
SUMMARY_KEYS = ("acc_all", "acc_minority", "acc_majority", "acc_worst_silo", "entropy_all", "entropy_minority",
                "entropy_majority", "ece")
WHERE = ("on 9 digit silos (5 original, 2 rotated + noisy, 2 inverted + blurred), every method trained for as "
         "many rounds as UEFL used on that seed")
ABLATION = Control(name="UEFL without extension (same VQ model and rounds, no silo flagged) in UEFL's place",
                   metric="gain.minority_acc.ablation.mean", interval=ci("gain.minority_acc.ablation"))
# Working-method gate, fixed before any rerun from the paper: UEFL's first iteration is its VQ base model
# (= the ablation); if it is more than the paper's smallest claimed gain (3 pp) below FedAvg, a UEFL - FedAvg
# verdict measures our VQ bottleneck, not the mechanism, and the extension's gain may be repairing it.
VS_FEDAVG = ("uefl_base_near_fedavg", "fedavg_learns_unshifted_digits")

PAPER = Paper(
    slug="uefl",
    title="Uncertainty-Based Extensible Codebook for Discrete Federated Learning in Heterogeneous Data Silos",
    method="UEFL: per-silo extensible VQ codebooks, extended (K-means-initialised) for silos whose MC-dropout "
           "entropy exceeds (1 + thd) x the mean",
    paper_class="B",
    source="abstracts-003.txt #10",
    official_code="destiny301/uefl (GitHub; train.py, model/vqmodel.py, utils.py read)",
    claims=(
        Claim(id="fl_uncertainty_higher_on_unfamiliar",
              text=("we have identified that models derived from FL exhibit markedly increased uncertainty when "
                    "applied to data silos with unfamiliar distributions: mean MC-dropout predictive entropy of "
                    f"FedAvg on the minority-distribution silos / on the majority silos > 1 {WHERE}"),
              source="abstract; plan claim 1 (direction)", metric="premise.fedavg.ratio", comparison=">",
              threshold=1.0, kind="direction", role="claim", interval=ci("premise.fedavg"),
              control=Control(name="FedAvg on the same split with no feature shift (the same silos' entropy ratio)",
                              metric="premise.homogeneous.ratio", interval=ci("premise.homogeneous")),
              requires=("fedavg_learns_unshifted_digits",)),
        Claim(id="uefl_minority_accuracy_gain",
              text=("UEFL outperforms state-of-the-art methods, achieving significant improvements in accuracy "
                    "(by 3%-22.1%): mean accuracy over the minority-distribution silos, UEFL - FedAvg >= 0.03 "
                    f"(the paper's lower bound) {WHERE}"),
              source="abstract; plan claim 2 (magnitude)", metric="gain.minority_acc.uefl.mean", comparison=">=",
              threshold=0.03, kind="magnitude", role="claim", interval=ci("gain.minority_acc.uefl"),
              control=ABLATION, requires=VS_FEDAVG),
        Claim(id="uefl_mean_accuracy_gain",
              text=("achieving significant improvements in accuracy (by 3%-22.1%): accuracy averaged over all "
                    f"silos (the paper's average), UEFL - FedAvg >= 0.03 {WHERE}"),
              source="abstract (magnitude)", metric="gain.mean_acc.uefl.mean", comparison=">=", threshold=0.03,
              kind="magnitude", role="claim", interval=ci("gain.mean_acc.uefl"),
              control=Control(name=ABLATION.name, metric="gain.mean_acc.ablation.mean",
                              interval=ci("gain.mean_acc.ablation")), requires=VS_FEDAVG),
        Claim(id="uefl_uncertainty_reduction",
              text=("and uncertainty reduction (by 38.83%-96.24%): mean MC-dropout predictive entropy over all "
                    "silos, UEFL / FedAvg <= 1 - 0.3883 = 0.6117 (the paper's lower bound) " + WHERE),
              source="abstract; plan claim 3 (magnitude)", metric="entropy_ratio.uefl.ratio", comparison="<=",
              threshold=0.6117, kind="magnitude", role="claim", interval=ci("entropy_ratio.uefl"),
              control=Control(name=ABLATION.name, metric="entropy_ratio.ablation.ratio",
                              interval=ci("entropy_ratio.ablation")), requires=VS_FEDAVG),
        Claim(id="uefl_beats_best_baseline",
              text=("UEFL outperforms state-of-the-art methods: accuracy averaged over all silos, UEFL - the best "
                    f"of FedAvg / FedProx / FedPer (highest mean over seeds) > 0 {WHERE}"),
              source="abstract (direction)", metric="vs_best_baseline.uefl.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("vs_best_baseline.uefl"),
              control=Control(name=ABLATION.name + ", against the same baseline",
                              metric="vs_best_baseline.ablation.mean", interval=ci("vs_best_baseline.ablation")),
              requires=VS_FEDAVG),
        Claim(id="extension_gain_over_ablation",
              text=("the uncertainty-driven extension itself: mean accuracy over the minority-distribution silos, "
                    f"UEFL - UEFL without extension (same VQ model and rounds) > 0 {WHERE}"),
              source="abstract (the mechanism: extend the codebooks of uncertain silos); declared per the issue",
              metric="gain.extension_minority_acc.mean", comparison=">", threshold=0.0, kind="direction",
              role="claim", interval=ci("gain.extension_minority_acc"),
              # capacity-matched: the same number of new K-means codebooks and rounds, but on the silos the
              # rule would never pick; if that helps the minority silos too, the gain is capacity, not uncertainty
              control=Control(name="the same extensions given to the least uncertain silos - UEFL without extension",
                              metric="gain.least_uncertain_minority_acc.mean",
                              interval=ci("gain.least_uncertain_minority_acc")),
              requires=("uefl_base_near_fedavg",)),
        Claim(id="fedavg_learns_unshifted_digits",
              text=("implementation check: FedAvg with this encoder + MLP on the unshifted federation reaches "
                    "accuracy > 0.8 averaged over silos"),
              source="our check", metric="methods.fedavg_homogeneous.acc_all.mean", comparison=">", threshold=0.8,
              kind="magnitude", role="sanity", interval=ci("methods.fedavg_homogeneous.acc_all")),
        Claim(id="uefl_base_near_fedavg",
              text=("working-method gate: UEFL's VQ base model (UEFL without extension) is within 0.03 (the paper's "
                    "smallest claimed gain) of FedAvg in accuracy averaged over all silos: ablation - FedAvg > -0.03 "
                    "(fixed before any rerun)"),
              source="ours (implementation check; margin from the abstract's 3%)", metric="gain.mean_acc.ablation.mean",
              comparison=">", threshold=-0.03, kind="magnitude", role="sanity", interval=ci("gain.mean_acc.ablation")),
    ),
    limitations=(
        "Digits (8x8, ~150 training and 50 test images per silo) stand in for MNIST / FMNIST / GTSRB / CIFAR; the "
        "three domains are the toolkit's feature shifts (rotation + noise, inversion + blur), not the paper's "
        "rotations by 0 / -50 / 120 degrees, and the federation is unbalanced (5/2/2 silos) as in the official "
        "5-silo run rather than 3/3/3. The encoder is two conv-GroupNorm-ReLU-pool stages instead of ResNet "
        "blocks, training is 2 local epochs per round instead of 20, and every silo's codebook 0 starts from "
        "K-means on its own features (the official N(0, 1) start collapsed to a single codeword at this scale). "
        "The paper's other baselines (e.g. DisTrans), the domain-generalisation experiments and the "
        "computational-overhead claim are not reproduced; uploads and parameter counts are reported only. "
        "As in the official code, the entropy that decides which silos get a new codebook is measured on the "
        "silos' test images, the same images every accuracy and entropy is then reported on: a test-set leak "
        "in UEFL's favour, kept to follow the official code (a validation split would remove it). Every claim "
        "against FedAvg requires the VQ base model to be within 3 pp of FedAvg (uefl_base_near_fedavg), and so "
        "does the extension's gain over the ablation: on a crippled base the new K-means codebook may only "
        "repair the bottleneck."
    ),
)


def _col(rows: pd.DataFrame, m: str, key: str) -> np.ndarray:
    return rows[rows["method"] == m].sort_values("seed")[key].to_numpy(float)


@paper_flow(PAPER, Params, smoke=SMOKE)
def uefl_flow(params: Params, ctx: RunContext) -> RunOutput:
    with threadpool_limits(limits=1):   # K-means and torch: one thread per seed task
        per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    rows = pd.DataFrame([{"seed": r["seed"], "method": m, **{k: v[k] for k in SUMMARY_KEYS}}
                         for r in per_seed for m, v in r["methods"].items()])
    silo_rows = pd.DataFrame([{"seed": r["seed"], "method": m, "silo": s, "distribution": int(d),
                               "acc": v["silo_acc"][s], "entropy": v["silo_entropy"][s], "ece": v["silo_ece"][s]}
                              for r in per_seed for m, v in r["methods"].items()
                              for s, d in enumerate(method.silo_distributions(params))])
    save_parquet(rows, ctx.data_dir / "per_seed.parquet")
    save_parquet(silo_rows, ctx.data_dir / "per_silo.parquet")

    uefl, noext, fedavg = (lambda k: _col(rows, "uefl", k)), (lambda k: _col(rows, "uefl_no_extension", k)), \
        (lambda k: _col(rows, "fedavg", k))
    best = max(BASELINES, key=lambda m: _col(rows, m, "acc_all").mean())
    dists = method.silo_distributions(params)
    flags = np.array([r["uefl_log"]["flagged"][0] if r["uefl_log"]["flagged"] else [0] * len(dists)
                      for r in per_seed], dtype=float)
    metrics = {
        "premise": {"fedavg": stats.ratio_of_means(fedavg("entropy_minority"), fedavg("entropy_majority")),
                    "homogeneous": stats.ratio_of_means(_col(rows, "fedavg_homogeneous", "entropy_minority"),
                                                        _col(rows, "fedavg_homogeneous", "entropy_majority"))},
        "gain": {"minority_acc": {"uefl": stats.paired_difference(uefl("acc_minority"), fedavg("acc_minority")),
                                  "ablation": stats.paired_difference(noext("acc_minority"), fedavg("acc_minority"))},
                 "mean_acc": {"uefl": stats.paired_difference(uefl("acc_all"), fedavg("acc_all")),
                              "ablation": stats.paired_difference(noext("acc_all"), fedavg("acc_all"))},
                 "extension_minority_acc": stats.paired_difference(uefl("acc_minority"), noext("acc_minority")),
                 "least_uncertain_minority_acc": stats.paired_difference(_col(rows, "uefl_least_uncertain",
                                                                              "acc_minority"), noext("acc_minority"))},
        "entropy_ratio": {"uefl": stats.ratio_of_means(uefl("entropy_all"), fedavg("entropy_all")),
                          "ablation": stats.ratio_of_means(noext("entropy_all"), fedavg("entropy_all")),
                          "uefl_minority": stats.ratio_of_means(uefl("entropy_minority"), fedavg("entropy_minority"))},
        "vs_best_baseline": {"best": best,
                             "uefl": stats.paired_difference(uefl("acc_all"), _col(rows, best, "acc_all")),
                             "ablation": stats.paired_difference(noext("acc_all"), _col(rows, best, "acc_all"))},
        "methods": {m: {k: stats.summarize(_col(rows, m, k)) for k in SUMMARY_KEYS} for m in METHODS},
        "per_silo": {m: {str(s): {k: float(g[k].mean()) for k in ("acc", "entropy", "ece")}
                         for s, g in silo_rows[silo_rows["method"] == m].groupby("silo")} for m in METHODS},
        "uefl": {"iterations": stats.summarize([r["uefl_log"]["iterations"] for r in per_seed]),
                 "rounds": stats.summarize([r["uefl_log"]["rounds"] for r in per_seed]),
                 "extended_any": float(np.mean([len(r["uefl_log"]["flagged"]) > 0 for r in per_seed])),
                 "flag_rate_minority_iter2": float(flags[:, dists > 0].mean()),
                 "flag_rate_majority_iter2": float(flags[:, dists == 0].mean()),
                 "threshold": stats.summarize([r["uefl_log"]["threshold"] for r in per_seed])},
        "communication": {"uploads_per_method": {m: int(np.mean([r["uploads"][m] for r in per_seed]))
                                                 for m in ("uefl", *BASELINES)},
                          "parameters": per_seed[0]["parameters"]},
        "timings": {f"{m}_s": float(sum(r["seconds"][m] for r in per_seed))
                    for m in ("uefl", "uefl_no_extension", "uefl_least_uncertain", *BASELINES)},
    }
    plot = (silo_rows.groupby(["method", "silo"], sort=False)["acc"].mean().reset_index()
            .rename(columns={"silo": "x", "acc": "y", "method": "series"}))
    return RunOutput(metrics=metrics, tables={"plot": plot[["x", "y", "series"]], "per_seed": rows,
                                               "per_silo": silo_rows},
                     figure=_figure(silo_rows, params), setup=_setup(params, metrics),
                     notes=_notes(params, metrics, per_seed))


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


def _fmt(d: dict, key: str = "mean", digits: int = 3) -> str:
    return f"{d[key]:.{digits}f} [{d['ci_low']:.{digits}f}, {d['ci_high']:.{digits}f}]"


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


def _notes(p: Params, m: dict, per_seed: list[dict]) -> str:
    meth = m["methods"]
    table = "\n".join(
        f"| {LABEL[k]} | {_fmt(meth[k]['acc_all'])} | {_fmt(meth[k]['acc_minority'])} | "
        f"{_fmt(meth[k]['acc_majority'])} | {meth[k]['acc_worst_silo']['mean']:.3f} | {_fmt(meth[k]['entropy_all'])} | "
        f"{meth[k]['entropy_minority']['mean']:.3f} / {meth[k]['entropy_majority']['mean']:.3f} | "
        f"{_fmt(meth[k]['ece'])} |" for k in METHODS)
    silos = "\n".join(
        f"| {LABEL[k]} | " + " | ".join(f"{v['acc']:.2f} / {v['entropy']:.2f} / {v['ece']:.2f}"
                                        for v in m["per_silo"][k].values()) + " |" for k in METHODS)
    n = len(method.silo_distributions(p))
    dists = method.silo_distributions(p)
    u = m["uefl"]
    flagged = "; ".join(f"seed {r['seed']}: " + (", ".join(
        f"iter {i + 2} flagged silos {[s for s, f in enumerate(fl) if f]}" for i, fl in enumerate(r['uefl_log']['flagged']))
        or "no silo above the threshold") for r in per_seed)
    pr, g, e, vb = m["premise"], m["gain"], m["entropy_ratio"], m["vs_best_baseline"]
    return (
        "**Per method** (mean over seeds [95% bootstrap CI]; accuracy and entropy are means of the per-silo values):\n\n"
        "| method | accuracy, all silos | minority silos | majority silos | worst silo | entropy (nats) | "
        "entropy minority / majority | ECE (all test images) |\n|---|---|---|---|---|---|---|---|\n" + table +
        "\n\n**Per silo** (accuracy / entropy / ECE, mean over seeds; silos "
        + ", ".join(f"{s}: {method.DISTRIBUTION_NAMES[int(d)]}" for s, d in enumerate(dists)) + "):\n\n"
        "| method | " + " | ".join(f"silo {s}" for s in range(n)) + " |\n|---|" + "---|" * n + "\n" + silos +
        f"\n\n**UEFL's iterations.** {u['iterations']['mean']:.1f} iterations and {u['rounds']['mean']:.1f} rounds on "
        f"average; a codebook was added in {u['extended_any']:.0%} of the seeds. At iteration 2 the rule flagged "
        f"{u['flag_rate_minority_iter2']:.0%} of the minority silos and {u['flag_rate_majority_iter2']:.0%} of the "
        f"majority silos ({flagged}).\n\n"
        f"**Premise.** FedAvg's entropy ratio minority / majority is {_fmt(pr['fedavg'], 'ratio')}; on the "
        f"unshifted twin federation the same silos give {_fmt(pr['homogeneous'], 'ratio')} (the control).\n\n"
        f"**Accuracy.** UEFL - FedAvg on the minority silos {_fmt(g['minority_acc']['uefl'])}, over all silos "
        f"{_fmt(g['mean_acc']['uefl'])}; the ablation (no extension) - FedAvg: {_fmt(g['minority_acc']['ablation'])} "
        f"and {_fmt(g['mean_acc']['ablation'])}; UEFL - ablation on the minority silos "
        f"{_fmt(g['extension_minority_acc'])}, the part the extension itself adds; the same number of extensions given to the least uncertain silos - ablation {_fmt(g['least_uncertain_minority_acc'])} (capacity-matched control). Best baseline: "
        f"{LABEL[vb['best']]}; UEFL - it {_fmt(vb['uefl'])}, ablation - it {_fmt(vb['ablation'])}. Reading: the "
        f"ablation's gap to FedAvg ({g['mean_acc']['ablation']['mean']:+.3f} over all silos) is the cost of the VQ "
        f"bottleneck itself at this scale (each image becomes {4} codewords of {2 * p.width} channels), and the "
        "extension can only win back part of it; the accuracy verdicts test UEFL as a whole, the UEFL - ablation "
        "line isolates the extension.\n\n"
        f"**Uncertainty.** Entropy UEFL / FedAvg {_fmt(e['uefl'], 'ratio')} (minority silos "
        f"{_fmt(e['uefl_minority'], 'ratio')}); ablation / FedAvg {_fmt(e['ablation'], 'ratio')}. Lower entropy "
        "alone is not better uncertainty: the ECE column shows whether the predictive distribution is calibrated "
        "(a sharper but miscalibrated model would lower the entropy and raise the ECE).\n\n"
        f"**Communication and overhead.** Uploads per run: {m['communication']['uploads_per_method']} (codebooks are "
        f"never uploaded); FedAvg's model has {m['communication']['parameters']['fedavg']} parameters, UEFL's shared "
        f"part {m['communication']['parameters']['uefl_shared']}, plus {m['communication']['parameters']['uefl_codebook_per_book']} "
        "per codebook kept on each silo. Wall times per method are under `timings` (a shared machine: not a claim).\n\n"
        "**Deviations from the official code.** (1) Codebook 0 starts, on every silo, from K-means on the silo's "
        "features under the initial encoder: with the official N(0, 1) start every feature mapped to one codeword "
        "and the VQ model stayed at chance (seen in development before any claim was evaluated). (2) Dropout is "
        "really on in the uncertainty passes; the official `validate` runs in eval mode, so its 20 passes are "
        "identical and its 'uncertainty' is the entropy of the deterministic softmax. (3) At a later iteration "
        "only flagged silos get K-means; the official code also re-initialises codebook 0 of every unflagged silo "
        "by K-means (its flag ignores the book index). (4) The VQ loss enters with weight 1 as in the official "
        "code (its --gamma 0.1 is never read). (5) A cap of max_iterations; the official loop has none. (6) As in "
        "the official code the entropy that flags silos is measured on their test images."
    )
