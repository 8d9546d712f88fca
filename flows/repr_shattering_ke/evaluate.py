"""Representation shattering in knowledge editing, the evaluation: the per-model claim statistics and their
controls, R and the damage per ring distance, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.manifold import Isomap

from flows.repr_shattering_ke import method
from flows.repr_shattering_ke.params import Params
from tasks import estimates as est
from tasks import stats
from tasks.contract import RunOutput
from tasks.records import Records
from tasks.report import fmt_estimate


def _seed_means(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` averaged over each seed's edits, in seed order."""
    return frame.groupby("seed")[column].mean().sort_index().to_numpy(float)


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, models = records["edits"], records["models"]
    per_seed = pd.DataFrame([method.seed_statistics(params, rows[rows["seed"] == seed].to_dict("records"), seed)
                             for seed in records.seeds])
    claims = [c for c in per_seed.columns if not c.startswith("control_")]
    metrics: dict = {
        "shatter": {c: stats.summarize(per_seed[c].to_numpy(float)) for c in claims},
        "control": {c.removeprefix("control_"): stats.summarize(per_seed[c].to_numpy(float))
                    for c in per_seed.columns if c.startswith("control_")},
        "model": {k: est.summary(models, k) for k in models.columns if k != "seed"},
        "edit": {"success_rate": stats.summarize(per_seed["success_rate"].to_numpy(float)),
                 "exactness_max_abs": float(rows["exactness"].max()),
                 "v_steps_mean": float(rows.loc[rows["d"] > 0, "v_steps"].mean()),
                 "v_steps_same_object": float(rows.loc[rows["d"] == 0, "v_steps"].mean())},
        "by_distance": {},
        "per_seed": {c: per_seed[c].tolist() for c in per_seed.columns},
    }
    counter = rows[rows["d"] > 0]
    metrics["diagnostic"] = {
        "R_rome_over_random": stats.ratio_of_means(_seed_means(counter, "R_rome"), _seed_means(counter, "R_random")),
        "recall_drop_random": stats.summarize(_seed_means(counter, "recall_drop_random")),
    }
    columns = ["R_rome", "R_random", "R_others_rome", "recall_drop_rome", "recall_drop_random",
               "composition_drop_rome", "inference_drop_rome", "success", "delta_norm", "update_norm"]
    for d in sorted(rows["d"].unique()):
        metrics["by_distance"][str(int(d))] = {c: stats.summarize(_seed_means(rows[rows["d"] == d], c)) for c in columns}
    plot = _plot_table(metrics)
    return RunOutput(metrics=metrics, tables={"plot": plot, "edits": rows}, figure=_figure(plot, records, params),
                     setup=_setup(params, metrics), notes=_measured(metrics))


def _plot_table(metrics: dict) -> pd.DataFrame:
    out = []
    for d, m in metrics["by_distance"].items():
        for series in ("R_rome", "R_random", "recall_drop_rome", "composition_drop_rome"):
            s = m[series]
            out.append({"x": int(d), "y": s["mean"], "y_low": s["ci_low"], "y_high": s["ci_high"], "series": series})
    return pd.DataFrame(out)


def _figure(plot: pd.DataFrame, records: Records, params: Params):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, series, label in ((axes[0], ("R_rome",), "R (ROME)"), (axes[1], ("recall_drop_rome", "composition_drop_rome"), "")):
        for s in series:
            g = plot[plot["series"] == s].sort_values("x")
            ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], marker="o", capsize=3,
                        label=s.replace("_rome", "").replace("_", " "))
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("ring distance d of the edit (0 = same object)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("shattering R (mean over models, 95% CI)")
    axes[1].set_ylabel("accuracy drop on unedited items")
    first_seed = records.seeds[0]
    first = records["representations"]
    first = first[first["seed"] == first_seed].sort_values("entity")
    if first["far"].notna().all():
        position = np.array(first["position"].tolist())[:, 0]
        both = np.vstack([np.array(first["orig"].tolist()), np.array(first["far"].tolist())])
        embedded = Isomap(n_neighbors=min(10, len(position) - 1), n_components=2).fit_transform(both)
        n = len(position)
        axes[2].scatter(*embedded[:n].T, c=position, cmap="hsv", s=30, label="unedited")
        axes[2].scatter(*embedded[n:].T, c=position, cmap="hsv", s=30, marker="x", label=f"after a d = {max(params.edit_distances)} edit")
        axes[2].set_title(f"seed {first_seed}: Isomap of entity representations (colour = cycle-0 position)",
                          fontsize=9)
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    far, near = method.far_near(p)
    mod = m["model"]
    return (
        f"**Knowledge graph** (one per seed, {p.seeds} seeds). {p.n_entities} entities on {p.n_cycles} cyclic orders "
        f"(random permutations); relations = k-th neighbour on a cycle, k in +-{p.steps} "
        f"({2 * p.n_cycles * len(p.steps)} relations, {p.n_entities * 2 * p.n_cycles * len(p.steps)} facts); "
        f"{p.holdout_frac:.0%} of the facts are never trained on. Training data: {p.n_walks} random walks of "
        f"{p.walk_hops} facts, `<bos> e0 r1 e1 r2 e2 r3 e3 <eos>` (word tokens).\n\n"
        f"**Model.** tasks.lm GPT, {p.n_layer} blocks, width {p.d_model}, {p.n_head} heads, AdamW lr {p.lr}, weight "
        f"decay {p.weight_decay}, {p.epochs} epochs of batch {p.batch_size}; weights cached under the data folder. "
        f"Unedited: training-fact recall {mod['train_recall']['mean']:.3f}, held-out fact accuracy "
        f"{mod['heldout_accuracy']['mean']:.3f}, 2-hop composition {mod['composition_accuracy']['mean']:.3f}; ring "
        "geometry of the entity representations (Spearman of representation distance with ring distance over entity "
        "pairs): " + ", ".join(f"cycle {c}: {fmt_estimate(mod[f'ring_geometry_cycle{c}'])}" for c in range(p.n_cycles)) + ".\n\n"
        f"**Edits.** Per model, {p.edits_per_distance} distinct training facts (x, r) per ring distance d in "
        f"{[0, *p.edit_distances]} re-mapped to the entity at distance d from the old object on r's cycle (d = 0: the "
        f"same object). ROME on block {p.edit_layer + 1}'s MLP output matrix (4 x {p.d_model} -> {p.d_model}), edit "
        f"site fact_token = '{p.fact_token}', C = uncentred second moment of the keys over the training walks, "
        f"{p.n_contexts} prompts per edit (the bare `<bos> x r` and chain prefixes `<bos> a r_a x r`), v* by "
        f"{p.v_steps} Adam steps (lr {p.v_lr}, weight decay {p.v_weight_decay}, KL factor {p.kl_factor}, clamp "
        f"{p.clamp_norm_factor} |v_init|). Beside every ROME update, a random rank-one update of the same Frobenius "
        f"norm.\n\n"
        f"**Measures.** Entity representation = residual stream after block {p.repr_layer + 1} at the entity token of "
        f"`<bos> e`; D = pairwise Euclidean distances; R = |D_edit - D_orig|_F / |D_orig|_F. Drops (unedited minus "
        f"edited accuracy, greedy) on training facts with another subject, held-out facts with another subject and "
        f"{p.n_chains} 2-hop chains avoiding the subject. Far = d >= {far}, near = d <= {near}. Each model gives one "
        "value of every statistic; intervals are Student-t over models (jackknife-t for the ratio of means)."
    )


def _measured(m: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    sh, co, bd = m["shatter"], m["control"], m["by_distance"]
    table = "\n".join(
        f"| {d} | {fmt_estimate(v['R_rome'])} | {v['R_random']['mean']:.3f} | {v['recall_drop_rome']['mean']:.4f} | "
        f"{v['composition_drop_rome']['mean']:.4f} | {v['inference_drop_rome']['mean']:.4f} | {v['success']['mean']:.2f} | "
        f"{v['delta_norm']['mean']:.2f} |" for d, v in bd.items())
    return (
        "**Per distance** (mean over models; R with its 95% interval):\n\n"
        "| d | R (ROME) | R (random rank-one, same norm) | recall drop | composition drop | held-out drop | success | |delta| |\n"
        "|---|---|---|---|---|---|---|---|\n" + table + "\n\n"
        f"**Claim statistics** (per model, then mean [95% CI] over models). Spearman(d, R) {fmt_estimate(sh['spearman_d_R'])} "
        f"(other-cycle distance control {fmt_estimate(co['spearman_dother_R'])}); r^2 of mean R on d {fmt_estimate(sh['r2_d_R'])} "
        f"(permuted d {fmt_estimate(co['r2_permuted_d'])}); Spearman(R, recall drop) {fmt_estimate(sh['spearman_R_recall_drop'])} "
        f"(permuted pairing {fmt_estimate(co['spearman_R_recall_drop_permuted'])}); far - near recall drop "
        f"{fmt_estimate(sh['far_minus_near_recall_drop'])} (permuted {fmt_estimate(co['far_minus_near_recall_permuted'])}); far - near "
        f"composition drop {fmt_estimate(sh['far_minus_near_composition_drop'])} (permuted "
        f"{fmt_estimate(co['far_minus_near_composition_permuted'])}); mean recall drop of counterfactual edits "
        f"{fmt_estimate(sh['recall_drop_counterfactual'])} (same-object edits {fmt_estimate(co['recall_drop_same_object'])}).\n\n"
        f"**Diagnostics** (no claim). R of the random rank-one update of equal norm, Spearman with d "
        f"{fmt_estimate(sh['spearman_d_R_random'])}; R(ROME) / R(random) {m['diagnostic']['R_rome_over_random']['ratio']:.3f}; "
        f"recall drop of the random update {fmt_estimate(m['diagnostic']['recall_drop_random'])}. Spearman(d, R restricted "
        f"to the other entities) {fmt_estimate(sh['spearman_d_R_others'])}. Edit success {fmt_estimate(m['edit']['success_rate'])}; "
        f"mean v* steps {m['edit']['v_steps_mean']:.1f}; max |W' k* - v*| {m['edit']['exactness_max_abs']:.1e}. "
        f"Same-object edits (d = 0): mean v* steps {m['edit']['v_steps_same_object']:.1f}."
    )
