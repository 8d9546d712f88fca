"""Place-field reorganisation by the TD error, the evaluation: density at the reward, learning speed, backward
shift and drift from the records, the tables and the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.placefield_td import method
from flows.placefield_td.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

CONDITIONS = ("fixed", "learned", "learned_noise", "drift_only")   # drift_only: the negative control
PER_SEED_KEYS = ("episodes_to_criterion", "mean_latency", "late_latency", "density_before", "density_after",
                 "pv_corr_second_half")


def evaluate(params: Params, records: Records) -> RunOutput:
    blocks, conds, field_rows = records["blocks"], records["conditions"], records["fields"]
    E = params.episodes_per_goal
    best = [int(blocks[blocks["block"] == k]["minimal_latency"].iloc[0]) for k in range(len(params.goals))]

    def block(name: str, k: int, key: str) -> np.ndarray:
        return est.per_seed(blocks, key, condition=name, block=k)

    def field_change(name: str, key: str) -> np.ndarray:
        return est.per_seed(conds, key, condition=name)

    # 1. density at the reward (learned fields, first goal); control: the same agents' density at the second
    # goal's location, which lies on the path but is not rewarded during the first block
    ratios = block("learned", 0, "density_after") / block("learned", 0, "density_before")
    dens = stats.median_ci(ratios)
    control_ratios = block("learned", 0, "density_other_after") / block("learned", 0, "density_other_before")
    control_dens = stats.median_ci(control_ratios)
    density = {"median_ratio": dens["median"], "ci_low": dens["ci_low"], "ci_high": dens["ci_high"],
               "ratio_by_seed": ratios.tolist(),
               "fields_within_radius_before": float(np.mean(block("learned", 0, "density_before")) * params.n_fields),
               "before": stats.summarize(block("learned", 0, "density_before")),
               "after": stats.summarize(block("learned", 0, "density_after")),
               "control": {**control_dens, "median_ratio": control_dens["median"], "location": params.goals[1],
                           "ratio_by_seed": control_ratios.tolist()},
               "noise_median_ratio": float(np.median(block("learned_noise", 0, "density_after")
                                                     / block("learned_noise", 0, "density_before"))),
               "goal2_before": stats.summarize(block("learned", 1, "density_before")),
               "goal2_after": stats.summarize(block("learned", 1, "density_after"))}

    # 2. learning speed: episodes to criterion, learned / fixed, per goal block; control: fields moved by the
    # drift noise alone / fixed. Censored: seeds where the learned or the fixed agent never reached the criterion.
    speed = {}
    for k in range(2):
        etc = {name: block(name, k, "episodes_to_criterion") for name in CONDITIONS}
        r = stats.median_ratio(etc["learned"], etc["fixed"], censor=E)
        speed[f"goal{k + 1}"] = {
            **r, "goal": params.goals[k],
            "censored_fraction": float(np.mean((etc["learned"] >= E) | (etc["fixed"] >= E))),
            "control": {**stats.median_ratio(etc["drift_only"], etc["fixed"], censor=E),
                        "censored_fraction": float(np.mean((etc["drift_only"] >= E) | (etc["fixed"] >= E)))},
            **{f"median_{n}": float(np.median(etc[n])) for n in CONDITIONS},
            **{f"censored_{n}": int((etc[n] >= E).sum()) for n in CONDITIONS},
            "by_seed": {n: etc[n].tolist() for n in CONDITIONS},
            "mean_latency": {n: stats.summarize(block(n, k, "mean_latency")) for n in CONDITIONS},
            "late_latency": {n: stats.summarize(block(n, k, "late_latency")) for n in CONDITIONS},
            "mean_latency_ratio": stats.ratio_of_means(block("learned", k, "mean_latency"),
                                                       block("fixed", k, "mean_latency")),
            "minimal_latency": best[k],
        }

    # 3. backward shift and elongation of the fields between start and first goal; control: the same fields
    # moved by the drift noise alone (an unbiased random walk: negative in about half of the seeds)
    shift = field_change("learned", "shift_between_start_goal")
    control_shift = field_change("drift_only", "shift_between_start_goal")
    # a fraction of independent seeds: Clopper-Pearson (a t interval of 0/1 values is [1, 1] when every seed agrees)
    negative = stats.proportion_ci(int((shift < 0).sum()), len(shift))
    shift_metrics = {"fraction_negative": float(np.mean(shift < 0)), "by_seed": shift.tolist(),
                     "negative": negative,
                     "control": {**stats.proportion_ci(int((control_shift < 0).sum()), len(control_shift)),
                                 "by_seed": control_shift.tolist()},
                     "center_shift": stats.summarize(shift),
                     "width_change": stats.summarize(field_change("learned", "width_change_between_start_goal")),
                     "amp_change": stats.summarize(field_change("learned", "amp_change_between_start_goal")),
                     "negative_sigma_fraction_end": {n: stats.summarize(field_change(n, "negative_sigma_fraction_end"))
                                                     for n in ("learned", "learned_noise")},
                     "noise_fraction_negative": float(np.mean(
                         field_change("learned_noise", "shift_between_start_goal") < 0))}

    # 4. drift: second half of the first block, with vs without noise; control of the stability claim: the noisy
    # agents' own early-block latency (a policy that has not converged) against the same late latency
    pv_noise, pv_clean = block("learned_noise", 0, "pv_corr_second_half"), block("learned", 0, "pv_corr_second_half")
    drift = {"noise": params.drift_noise,
             "pv_corr_noise": stats.summarize(pv_noise), "pv_corr_no_noise": stats.summarize(pv_clean),
             "pv_corr_fixed": stats.summarize(block("fixed", 0, "pv_corr_second_half")),
             "pv_difference": stats.paired_difference(pv_clean, pv_noise),
             "center_change_noise": stats.summarize(block("learned_noise", 0, "mean_abs_center_change_second_half")),
             "center_change_no_noise": stats.summarize(block("learned", 0, "mean_abs_center_change_second_half")),
             "late_latency_ratio": stats.ratio_of_means(block("learned_noise", 0, "late_latency"),
                                                        block("learned", 0, "late_latency")),
             "control_early_latency_ratio": stats.ratio_of_means(block("learned_noise", 0, "early_latency"),
                                                                 block("learned", 0, "late_latency"))}

    metrics = {
        "density": density, "speed": speed, "shift": shift_metrics, "drift": drift,
        "criterion": {"latency": params.criterion_latency, "window": params.criterion_window,
                      "minimal_latency_by_goal": best},
        "steps": {n: stats.summarize(field_change(n, "steps")) for n in CONDITIONS},
        "timings": {"per_seed_s": {n: field_change(n, "seconds").tolist() for n in CONDITIONS}},
    }

    curves = {n: np.array(est.seed_series(conds, "curve", {"condition": n}).tolist()) for n in CONDITIONS}
    width = params.curve_bin
    xs = [min(i * width + width / 2, 2 * E) for i in range(curves["fixed"].shape[1])]
    plot = pd.DataFrame([{"x": xs[j], "y": float(curves[n][:, j].mean()), "series": n}
                         for n in CONDITIONS for j in range(len(xs))])
    by_seed_block = blocks.set_index(["seed", "condition", "block"])
    per_seed_table = pd.DataFrame([{"seed": row.seed, "condition": row.condition,
                                    **{f"{key}_goal{k + 1}": by_seed_block.at[(row.seed, row.condition, k), key]
                                       for k in range(2) for key in PER_SEED_KEYS},
                                    "shift_between_start_goal": row.shift_between_start_goal,
                                    "width_change_between_start_goal": row.width_change_between_start_goal}
                                   for row in conds.itertuples()])
    fields_mean = _field_changes(field_rows, E)
    return RunOutput(metrics=metrics, tables={"plot": plot, "per_seed": per_seed_table, "field_changes": fields_mean},
                     figure=_figure(plot, field_rows, fields_mean, params, best),
                     setup=_setup(params), notes=_reading(params, metrics))


def _field_changes(field_rows: pd.DataFrame, E: int) -> pd.DataFrame:
    """Mean change of each field's centre and width over the first block, per condition (over seeds)."""
    before = field_rows[field_rows["episodes_done"] == 0].set_index(["seed", "condition", "field"])
    after = field_rows[field_rows["episodes_done"] == E].set_index(["seed", "condition", "field"])
    diff = (after[["lam", "sig", "alp"]].abs().assign(lam=after["lam"])
            - before[["lam", "sig", "alp"]].abs().assign(lam=before["lam"])).rename(
        columns={"lam": "d_lam", "sig": "d_sig", "alp": "d_alp"})
    diff["lam0"] = before["lam"]
    return diff.reset_index().groupby(["condition", "field"], as_index=False)[
        ["lam0", "d_lam", "d_sig", "d_alp"]].mean()


def _figure(plot: pd.DataFrame, field_rows: pd.DataFrame, changes: pd.DataFrame, params: Params, best: list[int]):
    E = params.episodes_per_goal
    g1, g2 = params.goals
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    ax = axes[0, 0]
    colors = {"fixed": "tab:gray", "learned": "tab:blue", "learned_noise": "tab:orange", "drift_only": "tab:purple"}
    for name, g in plot.groupby("series", sort=False):
        ax.plot(g["x"], g["y"], label=f"{name} fields", color=colors[name])
    ax.axvline(E, color="k", ls=":", lw=1)
    ax.axhline(params.criterion_latency, color="r", ls="--", lw=1, label=f"criterion ({params.criterion_latency:g})")
    ax.set(xlabel="episode", ylabel="latency (steps, mean over seeds)",
           title=f"Learning: goal {g1:g}, then {g2:g} (optimum {best[0]}, {best[1]})")
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    grid = np.linspace(-1, 1, 401)
    learned = field_rows[field_rows["condition"] == "learned"]
    for ep, label, color in ((0, "before learning", "tab:gray"), (E, f"after goal {g1:g} block", "tab:blue"),
                             (2 * E, f"after goal {g2:g} block", "tab:green")):
        at = learned[learned["episodes_done"] == ep]
        lam = np.stack([g.sort_values("field")["lam"].to_numpy() for _, g in at.groupby("seed")])  # (seeds, N)
        bw = 0.05                                                  # Gaussian kernel density of the centres
        kde = np.exp(-0.5 * ((grid - lam[:, :, None]) / bw) ** 2).mean(axis=(0, 1)) / (bw * np.sqrt(2 * np.pi))
        ax.plot(grid, kde, label=label, color=color, lw=1.5)
    ax.axvline(g1, color="r", lw=1)
    ax.axvline(g2, color="r", ls="--", lw=1)
    ax.axvline(params.start, color="g", ls="--", lw=1)
    ax.set(xlabel="position x", ylabel="density of field centres (Gaussian kernel, bw 0.05)",
           title="Field density (learned fields, all seeds)")
    ax.legend(fontsize=8)

    ax = axes[1, 0]
    xs = np.linspace(-1, 1, 401)
    seed0 = learned[learned["seed"] == learned["seed"].min()]
    for ep, color, alpha in ((0, "tab:gray", 0.5), (E, "tab:blue", 0.8)):
        f = seed0[seed0["episodes_done"] == ep].sort_values("field")
        phi = method.place_fields(f["lam"].to_numpy(), f["sig"].to_numpy(), f["alp"].to_numpy(), xs)
        ax.plot(xs, phi, color=color, lw=0.6, alpha=alpha)
    ax.axvline(g1, color="r", lw=1)
    ax.axvline(params.start, color="g", ls="--", lw=1)
    ax.set(xlabel="x", ylabel="phi(x)", title="Fields of the first seed: before (gray), after block 1 (blue)")

    ax = axes[1, 1]
    for name in ("learned", "learned_noise"):
        c = changes[changes["condition"] == name]
        ax.plot(c["lam0"], c["d_lam"], color=colors[name], label=f"{name}: d lambda")
        ax.plot(c["lam0"], c["d_sig"], color=colors[name], ls="--", label=f"{name}: d |sigma|")
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(g1, color="r", lw=1)
    ax.axvline(params.start, color="g", ls="--", lw=1)
    ax.set(xlabel="initial centre", ylabel="change over block 1 (mean over seeds)",
           title="Centre shift and width change per field")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _setup(params: Params) -> str:
    E = params.episodes_per_goal
    return (
        f"Official 1-D model (numpy/1D): track [-1, 1], start {params.start}, 2 actions, velocity smoothing 0.2, "
        f"max speed 0.1, Gaussian reward (s.d. {params.goal_size}) at every step until {params.max_reward:g} is "
        f"collected or {params.t_max} steps. N = {params.n_fields} homogeneous Gaussian fields "
        f"(sigma {params.sigma0}, alpha {params.alpha0}), actor-critic with gamma {params.gamma}, beta {params.beta}, "
        f"eta_actor = {params.eta_actor}, eta_critic = {params.eta_critic}, field rates "
        f"(lambda, sigma, alpha) = ({params.eta_center}, {params.eta_width}, {params.eta_amp}), online updates at "
        f"every step. {E} episodes with the goal at {params.goals[0]}, then {E} with it at {params.goals[1]} "
        f"(parameters carried over); {params.seeds} seeds.\n\n"
        "- **fixed**: field parameters frozen, only W_a and w_c learn (baseline).\n"
        "- **learned**: every field's centre, width and amplitude learn from the back-propagated TD error.\n"
        f"- **learned_noise**: learned, plus N(0, {params.drift_noise}^2) noise on every field parameter each step.\n"
        "- **drift_only** (negative control): fixed field rates, the same noise on every field parameter: fields "
        "that move, but not by the TD error.\n\n"
        f"N = {params.n_fields} fields (the plan's 64 put 6 centres within +-{params.density_radius} of the goal, "
        "so the density ratio moved in steps of one field, 6/64 -> 7/64 in every seed; with more fields the "
        "same radius holds about N/10 centres and the ratio measures a density). "
        "The four agents of a seed start from the same weights and share the action random stream. "
        f"Episodes to criterion: first episode at which the mean latency of the last {params.criterion_window} "
        f"episodes is < {params.criterion_latency:g} (censored at {E}); density: fraction of centres within "
        f"+-{params.density_radius} of the goal; backward shift: mean centre change over the first block of the "
        f"fields that start between start and goal; drift: population-vector correlation of phi(x) between "
        f"episodes {E // 2} and {E}, and latency over the last {params.late_fraction:.0%} of the block."
    )


def _reading(params: Params, metrics: dict) -> str:
    """The measured numbers behind each claim, for the notes (their reading is in NOTES.md)."""
    E = params.episodes_per_goal
    d, sh, dr = metrics["density"], metrics["shift"], metrics["drift"]
    best = metrics["criterion"]["minimal_latency_by_goal"]
    parts = [f"**Measured** ({E} episodes per goal, {params.seeds} seeds):",
             f"- Criterion attainability: the best latency any action sequence reaches is {best[0]} for goal "
             f"{params.goals[0]} and {best[1]} for goal {params.goals[1]} (criterion: < {params.criterion_latency:g}).",
             f"- Density at the reward: median ratio {d['median_ratio']:.2f} [{d['ci_low']:.2f}, {d['ci_high']:.2f}] "
             f"(fraction of centres within +-{params.density_radius} of {params.goals[0]}: {d['before']['mean']:.3f} "
             f"-> {d['after']['mean']:.3f}, about {d['fields_within_radius_before']:.0f} of {params.n_fields} centres "
             f"before); control, the same agents at the second goal's location {d['control']['location']:g}: "
             f"{d['control']['median_ratio']:.2f} [{d['control']['ci_low']:.2f}, {d['control']['ci_high']:.2f}]. "
             f"Mean centre change per half block without noise: {dr['center_change_no_noise']['mean']:.4f}."]
    for k in (1, 2):
        s = metrics["speed"][f"goal{k}"]
        parts.append(
            f"- Goal {k} ({s['goal']:g}): median episodes to criterion fixed {s['median_fixed']:.0f}, learned "
            f"{s['median_learned']:.0f}, learned + noise {s['median_learned_noise']:.0f}; ratio {s['ratio']:.3f} "
            f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]; never reach the criterion (censored at {E}): fixed "
            f"{s['censored_fixed']}/{params.seeds} seeds, learned {s['censored_learned']}/{params.seeds}; seeds where "
            f"the learned or the fixed agent is censored: {s['censored_fraction']:.0%}. Mean latency over the block: "
            f"fixed {s['mean_latency']['fixed']['mean']:.1f}, learned {s['mean_latency']['learned']['mean']:.1f} "
            f"(ratio {s['mean_latency_ratio']['ratio']:.2f}; optimum {s['minimal_latency']}). Control (fields moved "
            f"by drift noise alone / fixed): {s['control']['ratio']:.3f} [{s['control']['ci_low']:.3f}, "
            f"{s['control']['ci_high']:.3f}].")
    parts.append(
        f"- Backward shift: the fields between start and goal move by {sh['center_shift']['mean']:+.4f} on average "
        f"(negative in {sh['fraction_negative']:.0%} of seeds; fields moved by drift noise alone: "
        f"{sh['control']['mean']:.0%}) and change width (|sigma|) by {sh['width_change']['mean']:+.4f}; "
        f"{sh['negative_sigma_fraction_end']['learned']['mean']:.1%} of the learned fields end with sigma < 0.")
    parts.append(
        f"- Drift (noise {dr['noise']:g}): population-vector correlation over the second half of block 1 is "
        f"{dr['pv_corr_noise']['mean']:.4f} with noise and {dr['pv_corr_no_noise']['mean']:.4f} without; late "
        f"latency ratio (noise / none) {dr['late_latency_ratio']['ratio']:.3f} (control, the noisy agents' "
        f"early-block latency / the same: {dr['control_early_latency_ratio']['ratio']:.2f}). After the goal moves "
        f"the noisy agents reach the criterion in {params.seeds - metrics['speed']['goal2']['censored_learned_noise']}"
        f"/{params.seeds} seeds (learned fields without noise: "
        f"{params.seeds - metrics['speed']['goal2']['censored_learned']}/{params.seeds}).")
    return "\n".join(parts)
