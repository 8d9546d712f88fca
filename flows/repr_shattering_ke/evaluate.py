"""Representation shattering in knowledge editing, the evaluation: the per-seed claim statistics and their
controls, R and the damage per ring distance, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.manifold import Isomap

from flows.repr_shattering_ke import method
from flows.repr_shattering_ke.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records
from paperflows.core.report import fmt_estimate

BY_DISTANCE = ["R_rome", "R_random", "R_others_rome", "R_days_rome", "R_edit_layer_rome", "recall_drop_rome",
               "recall_drop_random", "month_recall_drop_rome", "day_recall_drop_rome", "recall_prob_drop_rome",
               "composition_drop_rome", "success", "new_prob", "delta_norm", "update_norm", "v_steps"]


def _seed_means(frame: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` averaged over each seed's edits, in seed order."""
    return frame.groupby("seed")[column].mean().sort_index().to_numpy(float)


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, models = records["edits"], records["models"]
    per_seed = pd.DataFrame([method.seed_statistics(params, rows[rows["seed"] == seed].to_dict("records"), seed)
                             for seed in records.seeds])
    claims = [c for c in per_seed.columns if not c.startswith("control_")]
    counter = rows[rows["d"] > 0]
    metrics: dict = {
        "shatter": {c: stats.summarize(per_seed[c].to_numpy(float)) for c in claims},
        "control": {c.removeprefix("control_"): stats.summarize(per_seed[c].to_numpy(float))
                    for c in per_seed.columns if c.startswith("control_")},
        "model": {k: est.summary(models, k) for k in models.columns if k != "seed"},
        "edit": {"success_rate": stats.summarize(per_seed["success_rate"].to_numpy(float)),
                 "exactness_max_rel": float(rows["exactness"].max()),
                 "v_steps_mean": float(counter["v_steps"].mean()),
                 "v_steps_same_object": float(rows.loc[rows["d"] == 0, "v_steps"].mean())},
        "diagnostic": {
            "R_rome_over_random": stats.ratio_of_means(_seed_means(counter, "R_rome"), _seed_means(counter, "R_random")),
            "recall_drop_random": stats.summarize(_seed_means(counter, "recall_drop_random")),
            "recall_prob_drop": stats.summarize(_seed_means(counter, "recall_prob_drop_rome"))},
        "by_distance": {str(int(d)): {c: stats.summarize(_seed_means(rows[rows["d"] == d], c)) for c in BY_DISTANCE}
                        for d in sorted(rows["d"].unique())},
        "per_seed": {c: per_seed[c].tolist() for c in per_seed.columns},
    }
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
    for ax, series in ((axes[0], ("R_rome", "R_random")), (axes[1], ("recall_drop_rome", "composition_drop_rome"))):
        for s in series:
            g = plot[plot["series"] == s].sort_values("x")
            ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], marker="o", capsize=3,
                        label=s.replace("_", " "))
        ax.set_xlabel("ring distance d of the edit on the 12 months (0 = same object)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("shattering R (mean over seeds, 95% CI)")
    axes[1].set_ylabel("accuracy drop on unedited items")
    first_seed = records.seeds[0]
    reps = records["representations"]
    reps = reps[reps["seed"] == first_seed].sort_values("month")
    if reps["far"].notna().all():
        # The map is fitted on the unedited months and the edited ones are placed on it: a joint fit would spend its
        # two axes on separating the two sets.
        isomap = Isomap(n_neighbors=4, n_components=2).fit(np.array(reps["orig"].tolist()))
        embedded = np.vstack([isomap.embedding_, isomap.transform(np.array(reps["far"].tolist()))])
        n = len(reps)
        axes[2].plot(*np.vstack([embedded[:n], embedded[:1]]).T, color="0.7", lw=0.8)
        axes[2].scatter(*embedded[:n].T, c=np.arange(n), cmap="hsv", s=40, label="unedited")
        axes[2].scatter(*embedded[n:].T, c=np.arange(n), cmap="hsv", s=40, marker="x",
                        label=f"after a d = {max(params.edit_distances)} edit")
        for i, (x, y) in enumerate(embedded[:n]):
            axes[2].annotate(method.MONTHS[i][:3], (x, y), fontsize=7)
        axes[2].set_title(f"seed {first_seed}: Isomap of the months' representations (block {params.repr_layer + 1})",
                          fontsize=9)
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(p: Params, m: dict) -> str:
    far, near = method.far_near(p)
    mod = m["model"]
    n_edits = (len(p.edit_distances) + 1) * p.edits_per_distance
    return (
        f"**Model.** `{p.model}` (tasks.pretrained, float32, CPU), zero-shot raw-text prompts. Unedited: fact recall "
        f"{mod['fact_recall']['mean']:.3f} (months {mod['month_fact_recall']['mean']:.3f}, weekdays "
        f"{mod['day_fact_recall']['mean']:.3f}; candidate argmax over the 12 months or 7 days), 'two months after' "
        f"{mod['composition_accuracy']['mean']:.3f}; ring geometry of the representations (Spearman of representation "
        f"distance with ring distance over pairs): months {mod['ring_geometry_months']['mean']:.3f} at block "
        f"{p.repr_layer + 1}, {mod['ring_geometry_months_edit_layer']['mean']:.3f} at block {p.edit_layer + 1}; "
        f"weekdays {mod['ring_geometry_days']['mean']:.3f}.\n\n"
        f"**Edits** ({p.seeds} seeds x {n_edits}). Per seed, {p.edits_per_distance} distinct month facts "
        f"('The month after/before X is', known facts first) per ring distance d in {[0, *p.edit_distances]}, "
        f"re-mapped to the month at distance d from the old object (d = 0: the same object). ROME on block "
        f"{p.edit_layer + 1}'s MLP down-projection, key at the subject's last token, C = E[k k^T] over "
        f"{p.cov_tokens} tokens of Python standard-library docstrings, {p.n_contexts} prompts per edit (the bare one "
        f"and neutral prefixes), v* by up to {p.v_steps} Adam steps (lr {p.v_lr}, weight decay {p.v_weight_decay}, "
        f"KL factor {p.kl_factor}, clamp {p.clamp_norm_factor} |v_init|). Beside every ROME update, a random rank-one "
        "update of the same Frobenius norm.\n\n"
        f"**Measures.** Month representation = residual stream after block {p.repr_layer + 1} at the month's token in "
        "'It happened in X'; D = pairwise Euclidean distances of the 12 months; R = |D_edit - D_orig|_F / |D_orig|_F. "
        "Drops (unedited minus edited candidate-argmax accuracy) on the 36 facts about other subjects (22 month, 14 "
        "weekday) and on the 'two months after' questions whose chain avoids the edited month. Far = d >= "
        f"{far}, near = d <= {near}. Each seed gives one value of every statistic; intervals are Student-t over seeds "
        "(jackknife-t for the ratio of means)."
    )


def _measured(m: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    sh, co, bd = m["shatter"], m["control"], m["by_distance"]
    table = "\n".join(
        f"| {d} | {fmt_estimate(v['R_rome'])} | {v['R_random']['mean']:.4f} | {v['R_others_rome']['mean']:.4f} | "
        f"{v['R_days_rome']['mean']:.4f} | {v['recall_drop_rome']['mean']:.4f} | {v['recall_drop_random']['mean']:.4f} | "
        f"{v['composition_drop_rome']['mean']:.4f} | {v['success']['mean']:.2f} | {v['new_prob']['mean']:.2f} | "
        f"{v['update_norm']['mean']:.2f} |" for d, v in bd.items())
    return (
        "**Per distance** (mean over seeds; R with its 95% interval):\n\n"
        "| d | R (ROME) | R (random rank-one, same norm) | R (other months) | R (weekdays) | recall drop | "
        "recall drop (random) | two-months-after drop | success | p(new) | update norm |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n" + table + "\n\n"
        f"**Claim statistics** (per seed, then mean [95% CI] over seeds). Spearman(d, R) {fmt_estimate(sh['spearman_d_R'])} "
        f"(permuted d {fmt_estimate(co['spearman_d_R_permuted'])}); r^2 of mean R on d {fmt_estimate(sh['r2_d_R'])} "
        f"(permuted d {fmt_estimate(co['r2_permuted_d'])}); Spearman(R, recall drop) {fmt_estimate(sh['spearman_R_recall_drop'])} "
        f"(permuted pairing {fmt_estimate(co['spearman_R_recall_drop_permuted'])}); far - near recall drop "
        f"{fmt_estimate(sh['far_minus_near_recall_drop'])} (permuted {fmt_estimate(co['far_minus_near_recall_permuted'])}); "
        f"far - near two-months-after drop {fmt_estimate(sh['far_minus_near_composition_drop'])} (permuted "
        f"{fmt_estimate(co['far_minus_near_composition_permuted'])}); mean recall drop of counterfactual edits "
        f"{fmt_estimate(sh['recall_drop_counterfactual'])} (same-object edits {fmt_estimate(co['recall_drop_same_object'])}).\n\n"
        f"**Diagnostics** (no claim). Spearman(d, R) of the random rank-one update of equal norm "
        f"{fmt_estimate(sh['spearman_d_R_random'])}; Spearman(d, ROME update norm) {fmt_estimate(sh['spearman_d_update_norm'])}; "
        f"R(ROME) / R(random) {m['diagnostic']['R_rome_over_random']['ratio']:.3f}; recall drop of the random update "
        f"{fmt_estimate(m['diagnostic']['recall_drop_random'])}; drop of the answer's candidate probability on unedited "
        f"facts {fmt_estimate(m['diagnostic']['recall_prob_drop'])}. Spearman(d, R over the 11 other months) "
        f"{fmt_estimate(sh['spearman_d_R_others'])}. Edit success {fmt_estimate(m['edit']['success_rate'])}; mean v* steps "
        f"{m['edit']['v_steps_mean']:.1f} (same-object edits {m['edit']['v_steps_same_object']:.1f}); max |W' k* - v*| / "
        f"|v*| {m['edit']['exactness_max_rel']:.1e}."
    )
