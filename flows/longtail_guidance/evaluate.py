"""Longtail Guidance (LTG), the evaluation: tail accuracy gains paired over seeds, tail detection AUROC, the
invariance check, the guidance-weight curve, the figure and the measured numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.longtail_guidance.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

METHODS = {"none": "no fine-tuning", "no_extra": "fine-tuned, no extra data", "unguided": "+ unguided",
           "ltg_entropy": "+ LTG-entropy", "ltg_epistemic": "+ LTG-epistemic"}


PARTS = ("tail", "head", "all")


def evaluate(params: Params, records: Records) -> RunOutput:
    accuracy, generation, scores = records["accuracy"], records["generation"], records["scores"]
    per_seed = records["per_seed"]
    metrics = _aggregate(accuracy, generation, per_seed)
    timings = records["timings"]
    metrics["timings"] = {k: timings[k].tolist() for k in timings.columns if k != "seed"}
    curve = _curve(accuracy, generation, params)
    tables = {"plot": curve, "accuracy": accuracy, "generation": generation, "scores": scores}
    first = records.seeds[0]
    figure = _figure(records["examples"], per_seed, first, curve, scores, metrics, params)
    return RunOutput(metrics=metrics, tables=tables, figure=figure, setup=_setup(params, metrics),
                     notes=_measured(params, metrics))


def _pp(accuracy: pd.DataFrame, method: str, part: str) -> np.ndarray:
    """Test accuracy of one fine-tuned model on one class group, in percentage points, per seed."""
    return 100.0 * est.per_seed(accuracy, part, method=method)


def _aggregate(accuracy: pd.DataFrame, generation: pd.DataFrame, per_seed: pd.DataFrame) -> dict:
    acc = {m: {part: stats.summarize(_pp(accuracy, m, part)) for part in PARTS} for m in METHODS}

    def gain(a: str, b: str) -> dict:
        return {f"{part}_pp": stats.paired_difference(_pp(accuracy, a, part), _pp(accuracy, b, part))
                for part in PARTS}

    summary = stats.summarize_by(generation.drop(columns="seed"), "variant",
                                 ["epistemic_mean", "entropy_mean", "oracle_agrees", "oracle_agrees_tail",
                                  "predictor_agrees", "test_tail_acc"])
    first = per_seed.iloc[0]
    return {
        "accuracy_pp": acc,
        "ltg_vs_unguided": gain("ltg_epistemic", "unguided"),
        "ltg_vs_no_extra": gain("ltg_epistemic", "no_extra"),
        "ltg_entropy_vs_unguided": gain("ltg_entropy", "unguided"),
        "ltg_epistemic_vs_entropy": gain("ltg_epistemic", "ltg_entropy"),
        "unguided_vs_no_extra": gain("unguided", "no_extra"),
        "selected_vs_unguided": gain("unguided_selected", "unguided"),
        "detection": {k: stats.summarize(per_seed[k].tolist())
                      for k in ("auroc_epistemic", "auroc_entropy", "epistemic_tail_mean", "epistemic_head_mean")},
        "invariance": {"max_abs_logit_diff": float(per_seed["max_abs_logit_diff"].max()),
                       "max_abs_param_diff": float(per_seed["max_abs_param_diff"].max()),
                       "all_bit_identical": int(per_seed["bit_identical"].all())},
        "chosen_weight": {name: per_seed[f"chosen_weight_{name}"].tolist() for name in ("epistemic", "entropy")},
        "generation": summary,
        "autoencoder_test_mse": stats.summarize(per_seed["recon_mse_test"].tolist()),
        "diffusion_final_loss": stats.summarize(per_seed["diffusion_final_loss"].tolist()),
        "train_counts": first["counts"].tolist(),
        "synthetic_allocation": first["allocation"].tolist(),
    }


def _curve(accuracy: pd.DataFrame, generation: pd.DataFrame, params: Params) -> pd.DataFrame:
    """Test tail accuracy (pp, seed mean and CI) against the guidance weight; w = 0 is unguided."""
    rows = []
    for name, label in (("epistemic", "LTG-epistemic"), ("entropy", "LTG-entropy")):
        for w in [0.0, *params.guidance_weights]:
            key = "unguided" if w == 0.0 else f"{name}@{w:g}"
            s = stats.summarize(_pp(accuracy, key, "tail"))
            epi = np.mean(generation.loc[generation["variant"] == key, "epistemic_mean"].to_numpy())
            rows.append({"x": w, "y": s["mean"], "series": label, "ci_low": s["ci_low"], "ci_high": s["ci_high"],
                         "generated_epistemic": float(epi)})
    s = stats.summarize(_pp(accuracy, "no_extra", "tail"))
    for w in [0.0, *params.guidance_weights]:
        rows.append({"x": w, "y": s["mean"], "series": "no extra data", "ci_low": s["ci_low"], "ci_high": s["ci_high"],
                     "generated_epistemic": float("nan")})
    return pd.DataFrame(rows)


def _figure(examples: pd.DataFrame, per_seed: pd.DataFrame, seed: int, curve: pd.DataFrame, scores: pd.DataFrame,
            metrics: dict, params: Params):
    """The six panels; F shows the generated images of the rarest class of ``seed``."""
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    ax = axes[0, 0]
    for i, (series, g) in enumerate(curve.groupby("series", sort=False)):
        ax.errorbar(g["x"] + 0.02 * i, g["y"], yerr=[g["y"] - g["ci_low"], g["ci_high"] - g["y"]], fmt="o--" if series == "no extra data" else "o-",
                    capsize=3, label=series)
    ax.set(xlabel="guidance weight w (0 = unguided)", ylabel="tail-class test accuracy (pp)",
           title=f"A. tail accuracy after fine-tuning ({params.n_generate} synthetic images)")
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    acc = metrics["accuracy_pp"]
    names = list(METHODS)
    means = [acc[m]["tail"]["mean"] for m in names]
    ax.bar(range(len(names)), means, yerr=[[acc[m]["tail"]["mean"] - acc[m]["tail"]["ci_low"] for m in names],
                                           [acc[m]["tail"]["ci_high"] - acc[m]["tail"]["mean"] for m in names]],
           capsize=4, color=[f"C{i}" for i in range(len(names))])
    ax.set_xticks(range(len(names)), [METHODS[m] for m in names], rotation=20, fontsize=8)
    ax.set(ylabel="tail-class test accuracy (pp, 95% Student-t CI)", title="B. methods (w chosen on validation)")

    ax = axes[0, 2]
    bins = np.linspace(0, max(scores["epistemic"].max(), 1e-6), 30)
    ax.hist(scores.loc[~scores["tail"], "epistemic"], bins=bins, alpha=0.6, density=True, label="head classes")
    ax.hist(scores.loc[scores["tail"], "epistemic"], bins=bins, alpha=0.6, density=True, label="tail classes")
    auc = metrics["detection"]["auroc_epistemic"]
    ax.set(yscale="log", xlabel="epistemic score (MI of the K heads, nats)", ylabel="density",
           title=f"C. test images: AUROC {auc['mean']:.2f} [{auc['ci_low']:.2f}, {auc['ci_high']:.2f}]")
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    for series, g in curve[curve["series"] != "no extra data"].groupby("series", sort=False):
        ax.plot(g["x"], g["generated_epistemic"], "o-", label=series)
    ax.set(xlabel="guidance weight w", ylabel="mean epistemic score of generated images",
           title="D. guidance raises the longtail signal")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    gen = metrics["generation"]
    for name, label in (("epistemic", "LTG-epistemic"), ("entropy", "LTG-entropy")):
        keys = ["unguided", *[f"{name}@{w:g}" for w in params.guidance_weights]]
        ax.plot([0.0, *params.guidance_weights], [100 * gen[k]["oracle_agrees_tail"]["mean"] for k in keys], "o-",
                label=label)
    ax.set(xlabel="guidance weight w", ylabel="tail synthetic images the oracle labels as conditioned (%)",
           title="E. label fidelity (oracle: 5-NN on all non-test images)")
    ax.legend(fontsize=8)

    ax = axes[1, 2]
    shown = examples[examples["seed"] == seed]
    ex = {key: g["image"].tolist() for key, g in shown.groupby("variant", sort=False)}
    rows = [np.concatenate([np.asarray(img).reshape(8, 8) for img in imgs] or [np.zeros((8, 8))], axis=1)
            for imgs in ex.values()]
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 1), (0, width - r.shape[1])), constant_values=-1) for r in rows]
    ax.imshow(np.concatenate(rows, axis=0), cmap="gray_r", vmin=-1, vmax=1)
    ax.set_yticks([4 + 9 * i for i in range(len(ex))], list(ex.keys()), fontsize=8)
    ax.set_xticks([])
    digit_order = per_seed.loc[per_seed["seed"] == seed, "digit_order"].iloc[0]
    ax.set_title(f"F. rarest class (digit {digit_order[-1]}), seed {seed}")
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    return (
        f"**Data.** scikit-learn 8x8 digits (pixels scaled to [-1, 1]). Per seed a random digit order assigns class "
        f"ranks c = 0..9 and rank c keeps n_c = max(round({p.head_count} x {p.decay:g}^c), {p.min_count}) train "
        f"images: {m['train_counts']} ({sum(m['train_counts'])} in all); the {p.n_tail} rarest ranks are the tail. "
        f"Balanced validation ({p.val_per_class}/class) and test ({p.test_per_class}/class) sets. {p.seeds} seeds; a "
        "seed draws the split and every model's initialisation and noise.\n\n"
        f"**Latent diffusion.** MLP autoencoder 64-{p.ae_hidden}-{p.latent_dim}-{p.ae_hidden}-64 (tanh) trained "
        f"{p.ae_epochs} epochs on the long-tailed train set; latents standardised. Class-conditional epsilon-MLP "
        f"(tasks.diffusion.TimeConditionedMLP, width {p.diff_width}, depth {p.diff_depth}) trained by train_ddpm, "
        f"T = {p.diffusion_steps} (linear schedule), {p.diff_train_steps} steps, label dropout {p.label_dropout:g}; "
        f"sampled ancestrally with classifier-free guidance scale {p.cfg_scale:g}.\n\n"
        f"**Predictor and epistemic head.** MLP 64-{'-'.join(map(str, p.pred_hidden))}-10 (ReLU), {p.pred_epochs} "
        f"epochs of Adam on the long-tailed data. Epistemic head: K = {p.n_heads} linear heads on the frozen "
        f"penultimate features, head k trained ({p.head_steps} full-batch Adam steps) on its own bootstrap resample; "
        "epistemic score = H[mean_k p_k] - mean_k H[p_k]. One forward pass of the predictor returns its logits and "
        "the score.\n\n"
        f"**Generation.** {p.n_generate} images per method, the same tail-weighted class allocation "
        f"{m['synthetic_allocation']} (proportional to max n - n_c), the same z_T and ancestral noise: unguided; "
        f"LTG-epistemic and LTG-entropy (predictive entropy of the predictor) at w in {p.guidance_weights}, guidance "
        f"w * grad_z_t log(f_lt(D(z0_hat(z_t))) + {p.signal_floor:g}) through the Tweedie estimate and the decoder "
        "(tasks.diffusion.tweedie_guidance in ddpm_sample). Synthetic label = conditioning class. The weight of each "
        "LTG variant is chosen per seed on validation tail accuracy. Control: "
        f"{len(p.guidance_weights)} more unguided draws with fresh z_T and ancestral noise, the best on validation tail "
        "accuracy kept.\n\n"
        f"**Evaluation.** The predictor is fine-tuned ({p.finetune_steps} Adam steps, lr {p.finetune_lr:g}, batches "
        f"of {p.batch_size} drawn from long-tailed + synthetic data; 'no extra data' gets the same steps on the "
        "long-tailed data alone). Tail-class test accuracy, paired over seeds, with 95% Student-t CIs."
    )


def _measured(p: Params, m: dict) -> str:
    """The measured numbers behind the claims, for the notes (how to read them is in NOTES.md)."""
    g = m["ltg_vs_unguided"]["tail_pp"]
    ge = m["ltg_entropy_vs_unguided"]["tail_pp"]
    gn = m["ltg_vs_no_extra"]["tail_pp"]
    un = m["unguided_vs_no_extra"]["tail_pp"]
    sg = m["selected_vs_unguided"]["tail_pp"]
    gen = m["generation"]
    w_max = max(p.guidance_weights)

    def fidelity(key: str) -> str:
        return f"{100 * gen[key]['oracle_agrees_tail']['mean']:.0f}%"

    return (
        f"**Measured.** LTG-epistemic minus unguided, tail accuracy: {g['mean']:+.1f} pp [{g['ci_low']:+.1f}, "
        f"{g['ci_high']:+.1f}] (p = {g['p_value']:.2g}); LTG-entropy minus unguided {ge['mean']:+.1f} pp "
        f"[{ge['ci_low']:+.1f}, {ge['ci_high']:+.1f}]; LTG-epistemic minus no extra data {gn['mean']:+.1f} pp "
        f"[{gn['ci_low']:+.1f}, {gn['ci_high']:+.1f}]; unguided minus no extra data {un['mean']:+.1f} pp "
        f"[{un['ci_low']:+.1f}, {un['ci_high']:+.1f}]. Chosen weights (epistemic): {m['chosen_weight']['epistemic']}. "
        f"Control of the gain claims (the best of {len(p.guidance_weights)} fresh unguided draws minus the unguided "
        f"draw): {sg['mean']:+.1f} pp [{sg['ci_low']:+.1f}, {sg['ci_high']:+.1f}]. Control of the detection claim: "
        f"predictive entropy AUROC {m['detection']['auroc_entropy']['mean']:.3f} (epistemic head: "
        f"{m['detection']['auroc_epistemic']['mean']:.3f}). Mean epistemic score of the generated images: "
        f"{gen['unguided']['epistemic_mean']['mean']:.3f} unguided, "
        f"{gen[f'epistemic@{w_max:g}']['epistemic_mean']['mean']:.3f} at w = {w_max:g} (LTG-epistemic); share of "
        f"tail-class synthetic images that the 5-NN oracle labels as their conditioning class: "
        f"{fidelity('unguided')} unguided, {fidelity(f'epistemic@{w_max:g}')} LTG-epistemic and "
        f"{fidelity(f'entropy@{w_max:g}')} LTG-entropy at w = {w_max:g}. Validation tail images: "
        f"{p.val_per_class * p.n_tail}. Invariance: max |param change| {m['invariance']['max_abs_param_diff']:g}."
    )
