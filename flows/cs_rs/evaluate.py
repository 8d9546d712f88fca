"""cs_rs, the evaluation: per-matrix paired differences of certified accuracies over seeds (worst matrix for the
claims), every method's accuracies, the PGD sanity check, the curves and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.cs_rs import method
from flows.cs_rs.claims import PAPER
from flows.cs_rs.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

MATRICES = tuple(method.COST_MATRICES)


def evaluate(params: Params, records: Records) -> RunOutput:
    rows = records["certified"]
    metrics = _metrics(rows, records["pgd"], records["training"], params)
    plot = _plot_table(rows, params)
    return RunOutput(metrics=metrics, tables={"plot": plot, "certified": rows}, figure=_figure(plot, rows, params),
                     setup=_setup(params), notes=_measured(params, metrics))


def _acc(rows: pd.DataFrame, model: str, matrix: str, certificate: str, radius: float) -> np.ndarray:
    """Per-seed accuracies, in seed order, of one (model, matrix, certificate, radius)."""
    return est.per_seed(rows, "accuracy", model=model, matrix=matrix, certificate=certificate, radius=radius)


def _diff(rows: pd.DataFrame, a: tuple[str, str, str, float], b: tuple[str, str, str, float]) -> np.ndarray:
    """Per-seed accuracy of the (model, matrix, certificate, radius) ``a`` minus that of ``b``, seeds paired."""
    keys = ("model", "matrix", "certificate", "radius")
    first, second = est.aligned(rows, "accuracy", dict(zip(keys, a)), dict(zip(keys, b)))
    return first - second


def _comparison(diffs: dict[str, np.ndarray]) -> dict:
    """Per-matrix paired summaries of per-seed differences, the per-matrix means and the worst matrix."""
    by = {m: stats.summarize(d) for m, d in diffs.items()}
    worst = min(by, key=lambda m: by[m]["mean"])
    return {"per_matrix": by, "by_matrix": {m: v["mean"] for m, v in by.items()},
            "worst": by[worst], "worst_index": MATRICES.index(worst.split("@")[0])}


def _metrics(rows: pd.DataFrame, pgd: pd.DataFrame, training: pd.DataFrame, p: Params) -> dict:
    rt, rr = p.tightness_radius, p.training_radius

    def cs(a: tuple[str, str], b: tuple[str, str], r: float) -> np.ndarray:
        """Certify-CS accuracy of (model, matrix) ``a`` minus that of ``b`` at radius r, per seed."""
        return _diff(rows, (*a, "cs", r), (*b, "cs", r))

    def cohen(a: tuple[str, str], b: tuple[str, str], r: float) -> np.ndarray:
        """Cohen-certified accuracy of (model, matrix) ``a`` minus that of ``b`` at radius r, per seed."""
        return _diff(rows, (*a, "cohen", r), (*b, "cohen", r))

    metrics: dict = {
        "tightness": _comparison({m: _diff(rows, ("gaussian", m, "cs", rt), ("gaussian", m, "cohen", rt))
                                  for m in MATRICES}),
        "tightness_standard": _comparison({m: _diff(rows, ("gaussian", f"{m}@standard", "cs", rt),
                                                    ("gaussian", f"{m}@standard", "cohen", rt)) for m in MATRICES}),
        "vs_gaussian": _comparison({m: cs((f"cs_macer:{m}", m), ("gaussian", m), rr) for m in MATRICES}),
        "vs_gaussian_control": _comparison({m: cs(("macer", m), ("gaussian", m), rr) for m in MATRICES}),
        "vs_macer": _comparison({m: cs((f"cs_macer:{m}", m), ("macer", m), rr) for m in MATRICES}),
        # reported, not a declared claim (the plan's claims compare with Gaussian and MACER only)
        "vs_reweight": _comparison({m: cs((f"cs_macer:{m}", m), (f"reweight:{m}", m), rr) for m in MATRICES}),
        "vs_macer_control": _comparison({m: cs((f"cs_macer:{method.WRONG_MATRIX[m]}", m), ("macer", m), rr)
                                         for m in MATRICES}),
        "clean_vs_macer": _comparison({m: cohen((f"cs_macer:{m}", "all_pair"), ("macer", "all_pair"), 0.0)
                                       for m in MATRICES}),
        "clean_vs_macer_control": _comparison({m: cohen((f"masked_macer:{m}", "all_pair"), ("macer", "all_pair"), 0.0)
                                               for m in MATRICES}),
        "certified_vs_macer": _comparison({m: cohen((f"cs_macer:{m}", "all_pair"), ("macer", "all_pair"), rt)
                                           for m in MATRICES}),
        "certified_vs_macer_control": _comparison({m: cohen((f"masked_macer:{m}", "all_pair"), ("macer", "all_pair"), rt)
                                                   for m in MATRICES}),
    }
    # every method's accuracies at the claim radii (seed examples: Certify-CS and Cohen; all points: standard)
    table = {}
    for m in MATRICES:
        models = ["gaussian", "macer", f"reweight:{m}", f"cs_macer:{m}"]
        table[m] = {model.split(":")[0]: {f"{c}_r{r:g}": stats.summarize(_acc(rows, model, m, c, r))
                                          for c in ("cs", "cohen") for r in (rt, rr)} for model in models}
    metrics["seed_accuracy"] = table
    standard_models = ["gaussian", "macer", *[f"{k}:{m}" for k in ("reweight", "cs_macer", "masked_macer") for m in MATRICES]]
    metrics["standard_accuracy"] = {model: {f"r{r:g}": stats.summarize(_acc(rows, model, "all_pair", "cohen", r))
                                            for r in (0.0, rt, rr)} for model in standard_models}
    paired = rows.pivot_table(index=["model", "matrix", "radius", "seed"], columns="certificate", values="accuracy")
    metrics["construction"] = {"min_cs_minus_cohen": float((paired["cs"] - paired["cohen"]).min())}
    attacked = int(pgd["attacked"].sum())
    metrics["pgd"] = {"attacked": attacked,
                      "violation_rate": int(pgd["violations"].sum()) / max(attacked, 1),
                      "power_success_rate": int(pgd["power_successes"].sum()) / max(attacked, 1),
                      "power_eps_mean": float(np.mean(pgd["power_eps"]))}
    train_s = training.groupby("model", sort=False)["seconds"].mean()
    metrics["timings"] = {"train_cpu_s_mean": {k: float(v) for k, v in train_s.items()},
                          "certify_cpu_s_mean": float(np.mean(pgd["certify_s"])),
                          "pgd_cpu_s_mean": float(np.mean(pgd["pgd_s"]))}
    return metrics


PLOT_SERIES = {"gaussian/cohen": ("gaussian", "cohen"), "gaussian/cs": ("gaussian", "cs"), "macer/cs": ("macer", "cs"),
               "reweight/cs": ("reweight:{m}", "cs"), "cs_macer/cs": ("cs_macer:{m}", "cs")}


def _plot_table(rows: pd.DataFrame, p: Params) -> pd.DataFrame:
    """Certified cost-sensitive robust accuracy of seed examples against the radius (mean over seeds),
    per cost matrix, model and certificate."""
    out = []
    for m in MATRICES:
        for series, (model, cert) in PLOT_SERIES.items():
            for r in p.curve_radii:
                acc = _acc(rows, model.format(m=m), m, cert, r)
                out.append({"x": r, "y": float(acc.mean()), "series": f"{m}:{series}", "matrix": m})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, rows: pd.DataFrame, p: Params):
    fig, axes = plt.subplots(1, len(MATRICES) + 1, figsize=(5 * (len(MATRICES) + 1), 4), squeeze=False)
    styles = {"gaussian/cohen": ("C0", "--"), "gaussian/cs": ("C0", "-"), "macer/cs": ("C1", "-"),
              "reweight/cs": ("C2", "-"), "cs_macer/cs": ("C3", "-")}
    for ax, m in zip(axes[0], MATRICES):
        for series, (colour, ls) in styles.items():
            g = plot[plot["series"] == f"{m}:{series}"]
            ax.plot(g["x"], g["y"], ls, color=colour, marker="o", ms=3, label=series)
        cost = method.COST_MATRICES[m]
        ax.set(title=f"{m}: seeds {cost.seeds} -> {cost.targets}", xlabel="L2 radius",
               ylabel="certified cost-sensitive robust acc. (seed examples)", ylim=(0, 1.02))
        ax.axvline(p.training_radius, color="grey", lw=0.8, ls=":")
    ax = axes[0][-1]
    for model, colour in (("gaussian", "C0"), ("macer", "C1"), ("cs_macer:single_pair", "C3"),
                          ("masked_macer:multi_target", "C7")):
        ys = [_acc(rows, model, "all_pair", "cohen", r).mean() for r in p.curve_radii]
        ax.plot(p.curve_radii, ys, color=colour, marker="o", ms=3, label=model)
    ax.set(title="standard certified accuracy (all test points, Cohen)", xlabel="L2 radius", ylim=(0, 1.02))
    for a in axes[0]:
        a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"**Data.** scikit-learn digits (8x8, pixels / 16 in [0, 1]), a stratified split per seed with {p.test_size} "
        f"test points. **Model.** MLP 64-{'-'.join(map(str, p.hidden))}-10, Adam (lr {p.lr}), {p.epochs} epochs, batch "
        f"{p.batch_size}, the same initialisation and batch order for every method of a seed. **Noise** sigma = {p.sigma}.\n\n"
        "**Cost matrices** (seed classes -> sensitive targets): "
        + "; ".join(f"{m}: {c.seeds} -> {c.targets}" for m, c in method.COST_MATRICES.items())
        + ".\n\n**Training.** Gaussian augmentation (Cohen, one noisy copy per example); cost-sensitive reweighted "
        f"Gaussian (seed-class weight {p.reweight}, one model per matrix); MACER (gauss_num {p.gauss_num}, lambda {p.lbd}, "
        f"gamma {p.gamma2}, beta {p.beta}); CS-MACER (official pair_macer.py loss, gamma1 = {p.gamma1}, gamma2 = {p.gamma2}, "
        "one model per matrix).\n\n"
        f"**Certification.** Every model: n0 = {p.n0} selection and n = {p.n} estimation draws per test point, alpha = "
        f"{p.alpha}; Cohen's certify (r1 = sigma Phi^-1(p_A), p_A the Clopper-Pearson bound at alpha) and Certify-CS "
        "(p_A at alpha/2, p_B the max over the targets of the upper bounds at alpha/(2|Omega|), r2 = sigma/2 (Phi^-1(p_A) - "
        "Phi^-1(p_B)), radius max(r1, r2)) on the same counts. A seed example is cost-sensitively robust at r when the "
        "top class is not a target and the radius is >= r (official analyze.py: a non-target wrong class counts as "
        f"robust). Claims at r = {p.tightness_radius} (tightness, standard accuracy) and r = {p.training_radius} (training); "
        "each is the worst case over the three matrices, with a Student-t interval over seeds. "
        f"**PGD sanity.** L2 PGD ({p.pgd_steps} steps, {p.pgd_noise} noise draws per step) on the soft smoothed Gaussian "
        f"model at up to {p.pgd_points} seed examples per seed certified by Certify-CS (3 -> 5) at r = {p.training_radius}; "
        f"Cohen's predict (n = {p.pgd_n}) on the adversarial points."
    )


def _pts(s: dict) -> str:
    """A difference of accuracies with its interval, in percentage points."""
    return f"{100 * s['mean']:+.1f} pts [{100 * s['ci_low']:+.1f}, {100 * s['ci_high']:+.1f}]"


# Per claim with a control: the control's metrics key and the claim's threshold (every claim is >=).
CONTROL_OF = {c.id: (c.control.metric.split(".")[0], c.threshold) for c in PAPER.claims if c.control}


def _controls_over(metrics: dict) -> dict[str, list[str]]:
    """Per claim, the matrices where the control's mean is on the claim's side of the threshold (all claims are >=)."""
    return {cid: [m for m, v in metrics[key]["by_matrix"].items() if v >= threshold]
            for cid, (key, threshold) in CONTROL_OF.items()}


def _share(metrics: dict) -> float:
    """Mean over matrices of (standard-setting gain) / (cost-sensitive gain) on the Gaussian model."""
    cs, std = metrics["tightness"]["by_matrix"], metrics["tightness_standard"]["by_matrix"]
    return float(np.mean([std[m] / cs[m] if cs[m] > 0 else np.nan for m in cs]))


def _measured(p: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (what they mean is in NOTES.md)."""
    def per_matrix(key: str) -> str:
        return "; ".join(f"{m} {_pts(v)}" for m, v in metrics[key]["per_matrix"].items())

    acc = metrics["standard_accuracy"]
    clean = ", ".join(f"{k} {100 * v['r0']['mean']:.1f}%" for k, v in acc.items())
    cert = ", ".join(f"{k} {100 * v[f'r{p.tightness_radius:g}']['mean']:.1f}%" for k, v in acc.items())
    seed_rows = []
    for m, by_model in metrics["seed_accuracy"].items():
        seed_rows.append(f"{m}: " + ", ".join(
            f"{k} {100 * v[f'cs_r{p.training_radius:g}']['mean']:.1f}% (Cohen {100 * v[f'cohen_r{p.training_radius:g}']['mean']:.1f}%)"
            for k, v in by_model.items()))
    pg = metrics["pgd"]
    return (
        f"**Measured. Tightness** (Gaussian model, r = {p.tightness_radius}): Certify-CS minus Cohen per matrix: "
        f"{per_matrix('tightness')}. Control, the same seed examples in the standard setting: "
        f"{per_matrix('tightness_standard')}.\n\n"
        f"**Training** (Certify-CS, r = {p.training_radius}), seed examples' certified cost-sensitive robust accuracy: "
        + " | ".join(seed_rows) + ". CS-MACER minus Gaussian: " + per_matrix("vs_gaussian") + "; control MACER minus "
        "Gaussian: " + per_matrix("vs_gaussian_control") + ". CS-MACER minus MACER: " + per_matrix("vs_macer")
        + "; control, CS-MACER trained for another matrix minus MACER: " + per_matrix("vs_macer_control")
        + ". CS-MACER minus the cost-sensitive reweighted Gaussian (not a declared claim): " + per_matrix("vs_reweight")
        + ".\n\n"
        f"**Accuracy.** Clean accuracy of the smoothed classifiers (all test points): {clean}. Standard certified accuracy at "
        f"r = {p.tightness_radius}: {cert}. CS-MACER minus MACER, clean: {per_matrix('clean_vs_macer')}; certified: "
        f"{per_matrix('certified_vs_macer')}. Masked-MACER control minus MACER, clean: "
        f"{per_matrix('clean_vs_macer_control')}.\n\n"
        "**Controls matrix by matrix**, the matrices where a control's own mean reaches its claim's threshold: "
        + "; ".join(f"{cid}: {', '.join(ms) if ms else 'none'}" for cid, ms in _controls_over(metrics).items())
        + f". Standard-setting tightness gain / cost-sensitive gain, mean over the matrices: {_share(metrics):.0%}.\n\n"
        f"**PGD sanity.** {pg['attacked']} certified seed examples attacked over the seeds: violation rate "
        f"{pg['violation_rate']:.3f} at eps = {p.training_radius}; at eps = the farthest nearest target image "
        f"(mean {pg['power_eps_mean']:.2f}) the attack reaches a target at {pg['power_success_rate']:.2f} of them. "
        f"Min of Certify-CS minus Cohen: {metrics['construction']['min_cs_minus_cohen']:+.3f}."
    )
