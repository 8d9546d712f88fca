"""topo_adv_multimodal, the evaluation: monotonicity of the TC losses in rho (Spearman per seed, sign-aligned
medians), detection power and false-positive rates of the MMD tests, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.topo_adv_multimodal import method
from flows.topo_adv_multimodal.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate
from tasks.correlation import spearman

LABEL = {"fgsm": "FGSM", "pgd": "PGD untargeted", "pgd_targeted": "PGD targeted", "noise": "random sign noise",
         "plain": "MMD on embeddings", "tp": "MMD on [embedding, dL_TP/dx]", "mk": "MMD on [embedding, dL_MK/dx]",
         "spread": "MMD on [embedding, d spread/dx] (non-topological control)"}


def _sign_aligned(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-seed Spearman values (n,) multiplied by the sign of their median: the sign-consistent magnitude."""
    sign = 1.0 if np.median(values) >= 0 else -1.0
    return sign * values, sign


def _monotonicity(sweep: pd.DataFrame, losses: list[str]) -> tuple[dict, pd.DataFrame]:
    curves = sweep.groupby(["seed", "kind", "rho"], sort=True)[losses].mean().reset_index()
    out, rows = {}, []
    for loss in losses:
        entry, aligned = {}, {}
        for kind in method.PERTURBATIONS:
            per_seed = np.array([spearman(g["rho"], g[loss]) for _, g in curves[curves["kind"] == kind].groupby("seed")])
            aligned[kind], sign = _sign_aligned(per_seed)
            entry[kind] = {**stats.median_ci(aligned[kind]), "sign": sign, "per_seed_spearman": per_seed.tolist()}
            rows += [{"loss": loss, "kind": kind, "seed": s, "spearman": v} for s, v in zip(sorted(curves["seed"].unique()), per_seed)]
        # >= t iff at least 2 of 3 attacks' medians reach t; Bonferroni order-statistic interval (paperflows.core.stats)
        entry["second_best"] = stats.ranked_median(np.stack([aligned[a] for a in method.ATTACKS]), 2)
        entry["per_attack"] = {k: entry[k]["median"] for k in method.ATTACKS}
        out[loss] = entry
    return out, pd.DataFrame(rows)


def _detection(detect: pd.DataFrame, level: float) -> dict:
    detect = detect.assign(reject=(detect["p_value"] <= level).astype(float))
    rates = detect.groupby(["null", "test", "seed"])["reject"].mean()
    power = {t: rates.loc[(False, t)].sort_index().to_numpy() for t in method.DETECTORS}
    fpr = {t: rates.loc[(True, t)].sort_index().to_numpy() for t in method.DETECTORS}
    return {"power": {t: stats.summarize(v) for t, v in power.items()},
            "fpr": {t: stats.summarize(v) for t, v in fpr.items()},
            "gain": {t: stats.paired_difference(power[t], power["plain"]) for t in ("tp", "mk", "spread")},
            "per_seed_power": {t: v.tolist() for t, v in power.items()}}


def evaluate(params: Params, records: Records) -> RunOutput:
    sweep, detect, encoder = records["sweep"], records["detection"], records["encoder"]
    losses = [f"tp_{a:g}" for a in params.alphas] + [f"mk_{s:g}" for s in params.sigmas]
    monotonicity, spearman_rows = _monotonicity(sweep, losses + ["pers0_image", "pers1_image"])
    losses += ["pers0_image", "pers1_image", "pers0_text", "pers1_text"]
    monotonicity["tp"] = monotonicity[f"tp_{params.tp_alpha:g}"]
    monotonicity["mk"] = monotonicity[f"mk_{params.mk_sigma:g}"]
    accuracy = {k: est.summary(encoder, f"accuracy_{k}") for k in ("clean", *method.PERTURBATIONS)}
    top = max(params.rhos)
    ends = sweep[sweep["rho"].isin([0.0, top])].groupby(["kind", "rho"])[["pers0_image", "pers1_image"]].mean()
    pers_sides = {"text": [float(sweep[f"pers{q}_text"].mean()) for q in (0, 1)],
                  "clean": [float(ends.loc[(method.ATTACKS[0], 0.0), f"pers{q}_image"]) for q in (0, 1)]}
    pers_sides.update({k: [float(ends.loc[(k, top), f"pers{q}_image"]) for q in (0, 1)] for k in method.PERTURBATIONS})
    metrics = {"accuracy": accuracy, "monotonicity": monotonicity, "detection": _detection(detect, params.level),
               "pers_sides": pers_sides, "logit_scale": float(np.mean(est.per_seed(encoder, "logit_scale")))}
    curves = (sweep.groupby(["kind", "rho"])[losses].mean().reset_index())
    plot = pd.DataFrame([{"x": r["rho"], "y": r[f"tp_{params.tp_alpha:g}"], "series": f"TP {r['kind']}"} for _, r in curves.iterrows()]
                        + [{"x": r["rho"], "y": r[f"mk_{params.mk_sigma:g}"], "series": f"MK {r['kind']}"} for _, r in curves.iterrows()])
    return RunOutput(metrics=metrics, tables={"plot": plot, "curves": curves, "spearman": spearman_rows},
                     figure=_figure(curves, metrics, params), setup=_setup(params), notes=_measured(params, metrics))


def _figure(curves: pd.DataFrame, metrics: dict, params: Params):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    for ax, key, title in ((axes[0], f"tp_{params.tp_alpha:g}", f"L_TP (alpha = {params.tp_alpha:g})"),
                           (axes[1], f"mk_{params.mk_sigma:g}", f"L_MK (sigma = {params.mk_sigma:g})")):
        for kind in method.PERTURBATIONS:
            g = curves[curves["kind"] == kind]
            ax.plot(g["rho"], g[key], "o-" if kind != "noise" else "s--", label=LABEL[kind],
                    color="grey" if kind == "noise" else None)
        ax.set(xlabel="fraction rho of perturbed images in the batch", ylabel=f"{title}, mean over seeds and batches",
               title=title)
        ax.legend(fontsize=8)
    det = metrics["detection"]
    names = list(method.DETECTORS)
    x = np.arange(len(names))
    for offset, kind, colour in ((-0.2, "power", "C3"), (0.2, "fpr", "C0")):
        means = [det[kind][t]["mean"] for t in names]
        err = [[m - det[kind][t]["ci_low"] for t, m in zip(names, means)], [det[kind][t]["ci_high"] - m for t, m in zip(names, means)]]
        axes[2].bar(x + offset, means, 0.4, yerr=err, capsize=3, color=colour,
                    label=f"power (rho = {params.detect_rho:g} PGD)" if kind == "power" else "false-positive rate (rho = 0)")
    axes[2].axhline(params.level, color="k", ls=":", lw=1)
    axes[2].set_xticks(x, ["plain", "+TP grad", "+MK grad", "+spread grad"])
    axes[2].set(ylabel="rejection rate (mean over seeds, 95% CI)", title="MMD permutation tests, level 0.05")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params) -> str:
    return (
        f"**Encoder.** Per seed, a CLIP-style dual encoder is trained from scratch on {p.n_train} of the 1,797 8x8 "
        "digits (pixels in [0, 1]), each paired with a generated caption (article, thin/thick by ink relative to "
        "the class median, a style word, an optional noun and the class as a name or numeral, random order, "
        f"bag of tokens): image tower MLP 64 -> {p.image_hidden} -> {p.embed_dim}, text tower MLP -> "
        f"{p.text_hidden} -> {p.embed_dim}, unit-norm embeddings, symmetric InfoNCE with a learnable temperature, "
        f"Adam lr {p.lr}, {p.epochs} epochs of batches of {p.train_batch}. Zero-shot classification averages the "
        "embeddings of four prompts per class (\"a thin/thick handwritten seven/7\").\n\n"
        f"**Attacks** on the held-out pool (L-inf, eps = {p.eps}, pixels clipped to [0, 1], `tasks.attacks`): FGSM "
        f"and PGD-{p.pgd_steps} (step {p.pgd_step_size}, one random start) maximising the InfoNCE loss of the true "
        "(image, class prompt) pair, and targeted PGD minimising it at a random wrong class. Control: random "
        "sign noise of the same budget.\n\n"
        f"**Topological-Contrastive losses.** A batch is B = {p.batch} held-out image-caption pairs; the first "
        f"round(rho B) images are replaced by their perturbed versions (nested in rho), rho in {list(p.rhos)}, "
        f"{p.sweep_batches} batches per seed. Vietoris-Rips H0 and H1 of the image cloud X and of the caption "
        "cloud Y (Euclidean, gudhi, `tasks.topology`); L_TP^alpha = sum_q |Pers^alpha_q(X) - Pers^alpha_q(Y)| "
        f"(alpha in {list(p.alphas)}), L_MK^sigma = sum_q d_sigma(PD_q(X), PD_q(Y)) with d_sigma the distance of "
        f"the Reininghaus scale-space kernel (sigma in {list(p.sigmas)}). Monotonicity is Spearman(rho, loss) "
        "per seed over the rho grid.\n\n"
        f"**Detection.** Per repetition ({p.detect_reps} per seed) three disjoint batches of {p.batch}: a clean "
        f"reference, a test batch with {p.detect_rho:g} of its images replaced by PGD images (power) and a clean "
        "test batch (false-positive rate). Per-sample features: the image embedding and the gradient of "
        f"L_TP^{p.tp_alpha:g} / L_MK^{p.mk_sigma:g} (or of the non-topological spread loss, the control) with "
        "respect to it, computed against the captions within batches of B drawn from the pooled reference + test "
        "rows by a random partition blind to which sample a row came from (features computed per sample batch "
        "are tied to their batch, e.g. a translation-invariant loss's gradients sum to zero over it, which made "
        "the permutation test conservative, 0 false positives and 0 power, in a first full run; the label-blind "
        "partition keeps the pooled features exchangeable under the null). MMD^2 with a product "
        "of Gaussian kernels (median heuristic per block), permutation test with "
        f"{p.n_permutations} permutations, reject at p <= {p.level}.\n\n"
        f"{p.seeds} seeds (encoder, captions, attacks and batches)."
    )


def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    acc = m["accuracy"]
    mono = m["monotonicity"]
    det = m["detection"]
    lines = []
    for loss, name in (("tp", f"L_TP^{p.tp_alpha:g}"), ("mk", f"L_MK^{p.mk_sigma:g}")):
        per = "; ".join(f"{LABEL[k]} {mono[loss][k]['sign']:+.0f} x {fmt_estimate(mono[loss][k], 'median')} "
                        f"(per seed {', '.join(f'{v:+.2f}' for v in mono[loss][k]['per_seed_spearman'])})"
                        for k in method.PERTURBATIONS)
        lines.append(f"- {name}: second-best attack {fmt_estimate(mono[loss]['second_best'], 'value')}; sign x median "
                     f"|Spearman| per perturbation: {per}.")
    other = ", ".join(f"{loss}: second best {mono[loss]['second_best']['value']:.2f}, noise {mono[loss]['noise']['median']:.2f}"
                      for loss in mono if loss not in ("tp", "mk"))
    sides = m["pers_sides"]
    crossing = (
        f"**The two sides of L_TP** (Pers^{p.tp_alpha:g}_q, mean over seeds and batches): text cloud H0 "
        f"{sides['text'][0]:.2f}, H1 {sides['text'][1]:.2f}; clean image cloud H0 {sides['clean'][0]:.2f}, H1 "
        f"{sides['clean'][1]:.2f}; at rho = {max(p.rhos):g}: "
        + ", ".join(f"{LABEL[k]} H0 {sides[k][0]:.2f}, H1 {sides[k][1]:.2f}" for k in method.PERTURBATIONS)
        + ".\n\n")
    powers = "; ".join(f"{LABEL[t]}: power {fmt_estimate(det['power'][t])}, FPR {fmt_estimate(det['fpr'][t])}" for t in method.DETECTORS)
    gains = "; ".join(f"{t}: {fmt_estimate(det['gain'][t])} (paired t-test p = {det['gain'][t]['p_value']:.3g})"
                      for t in ("tp", "mk", "spread"))
    return (
        f"**Measured. Encoder and attacks.** Zero-shot accuracy on the held-out pool: clean {fmt_estimate(acc['clean'])}; "
        + ", ".join(f"{LABEL[k]} {fmt_estimate(acc[k])}" for k in method.PERTURBATIONS)
        + f" (mean over seeds, 95% CI). Learnt logit scale {m['logit_scale']:.1f}.\n\n"
        "**Monotonicity** (sign-aligned median over seeds of Spearman(rho, loss)):\n" + "\n".join(lines)
        + f"\n- all losses and the image side alone: {other}.\n\n" + crossing +
        f"**Detection** (rho = {p.detect_rho:g} PGD images; rejection rates over {p.detect_reps} repetitions per "
        f"seed, mean over seeds [95% CI]): {powers}. Power gain over plain MMD: {gains}.\n\n"
        f"Plain test's power at rho = {p.detect_rho:g}: {det['power']['plain']['mean']:.3f} (level {p.level})."
    )
