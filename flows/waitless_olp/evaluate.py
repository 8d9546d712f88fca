"""Wait-less OLP, the evaluation: regret ratios and slopes over T from the records, the timing, the figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.waitless_olp.method import exponent_tag, resolve_frequency
from flows.waitless_olp.params import Params
from paperflows.core import estimates as est
from paperflows.core import stats
from paperflows.core.contract import RunOutput
from paperflows.core.records import Records

TIMED = ("lp_every_step", "waitless", "first_order")
TIMED_COLUMNS = ("seconds", "regret", "n_lp", "lp_seconds")


def policy_names(params: Params) -> tuple[str, str]:
    """Row names of the headline wait-less policy and of the plan's literal variant (first f exponent)."""
    tag = exponent_tag(params.f_exponents[0])
    return f"waitless_{tag}", f"waitless_between_{tag}"


def ablation_name(params: Params) -> str:
    """Row name of the negative control: the headline wait-less policy without its LP re-solves."""
    return f"waitless_nolp_{exponent_tag(params.f_exponents[0])}"


def _ratio_over_T(rows: pd.DataFrame, Ts: list[int], policy: str) -> dict[str, dict[str, float]]:
    """regret(first-order) / regret(policy) at each T, seeds paired."""
    return {str(T): est.ratio(rows, "regret", {"T": T, "policy": "first_order"}, {"T": T, "policy": policy})
            for T in Ts}


def _at_T(ratio_by_T: dict[str, dict[str, float]], T: str) -> dict:
    return {**ratio_by_T[T], "T": int(T)}


def evaluate(params: Params, records: Records) -> RunOutput:
    rows, timed = records["regret"], records["timing"]
    proposed, _ = policy_names(params)
    ablation = ablation_name(params)
    Ts = sorted(params.horizons)
    policies = list(dict.fromkeys(rows["policy"]))

    by_T = stats.summarize_by(rows.sort_values(["T", "seed"], kind="stable"), ["T", "policy"], "regret")
    ratio_by_T = _ratio_over_T(rows, Ts, proposed)
    control_by_T = _ratio_over_T(rows, Ts, ablation)
    worst = min(ratio_by_T, key=lambda T: ratio_by_T[T]["ci_low"])
    control_worst = min(control_by_T, key=lambda T: control_by_T[T]["ci_low"])
    slopes = {p: stats.loglog_slope_ci(Ts, est.by_setting(rows, "regret", "T", Ts, policy=p))
              for p in ("first_order", proposed, ablation)}

    timing = {name: {column: est.per_seed(timed, column, policy=name) for column in TIMED_COLUMNS} for name in TIMED}
    lp_s, wl_s = timing["lp_every_step"]["seconds"], timing["waitless"]["seconds"]
    f_timing = int(timed["f"].iloc[0])
    speedup = lp_s / wl_s
    # The speed-up expected from the solve counts alone (T-1 solves against T/f-1): the runtime check divides by it.
    solve_ratio = timing["lp_every_step"]["n_lp"] / timing["waitless"]["n_lp"]
    per_solve = {name: (timing[name]["lp_seconds"] / timing[name]["n_lp"]).tolist() for name in TIMED[:2]}
    metrics = {
        "f": {str(T): resolve_frequency(T, params.f_exponents[0]) for T in Ts},
        "regret": {
            "by_T": by_T,
            "ratio_by_T": ratio_by_T,
            "ratio_Tmax": _at_T(ratio_by_T, str(Ts[-1])),
            "ratio_worst_T": _at_T(ratio_by_T, worst),
            "loglog_slope": slopes[proposed],
            "loglog_slope_first_order": slopes["first_order"],
            "ratio_by_T_point": {T: r["ratio"] for T, r in ratio_by_T.items()},
            "min_regret": float(rows["regret"].min()),
        },
        "control": {  # the ablation without LP re-solves, judged by the same metrics
            "policy": ablation,
            "ratio_by_T": control_by_T,
            "ratio_Tmax": _at_T(control_by_T, str(Ts[-1])),
            "ratio_worst_T": _at_T(control_by_T, control_worst),
            "loglog_slope": slopes[ablation],
        },
        "lp_every_step": {
            "T": params.timing_T, "f": f_timing, "instances": len(lp_s),
            **{name: stats.summarize(timing[name]["regret"]) for name in TIMED},
            "n_lp": {name: int(timing[name]["n_lp"][0]) for name in TIMED[:2]},
        },
        "timings": {
            "lp_every_step_s": lp_s.tolist(), "waitless_s": wl_s.tolist(),
            "first_order_s": timing["first_order"]["seconds"].tolist(),
            "runtime_ratio": _spread(speedup),
            "runtime_ratio_over_f": _spread(speedup / f_timing),
            "solve_count_ratio": solve_ratio.tolist(),
            "runtime_ratio_over_solve_ratio": _spread(speedup / solve_ratio),
            "seconds_per_lp_solve": {name: {"mean": float(np.mean(v)), "values": v} for name, v in per_solve.items()},
        },
    }

    plot = pd.DataFrame([{"x": T, "y": by_T[str(T)][p]["mean"], "y_low": by_T[str(T)][p]["ci_low"],
                          "y_high": by_T[str(T)][p]["ci_high"], "series": p} for p in policies for T in Ts])
    lp_point = metrics["lp_every_step"]["lp_every_step"]
    plot = pd.concat([plot, pd.DataFrame([{"x": params.timing_T, "y": lp_point["mean"], "y_low": lp_point["ci_low"],
                                           "y_high": lp_point["ci_high"], "series": "lp_every_step"}])],
                     ignore_index=True)
    return RunOutput(metrics=metrics, tables={"plot": plot, "regret": rows.drop(columns="seconds")},
                     figure=_figure(plot, timing, f_timing, params.timing_T),
                     setup=_setup(params, metrics), notes=_reading(params, metrics))


def _spread(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(values.mean()), "min": float(values.min()), "max": float(values.max())}


def _figure(plot: pd.DataFrame, timing: dict[str, dict[str, np.ndarray]], f: int, timing_T: int):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for series, g in plot.groupby("series", sort=False):
        ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], marker="o", capsize=3,
                    label=series, linestyle="none" if len(g) == 1 else "-")
    ax.set(xscale="log", yscale="log", xlabel="T (customers)", ylabel="regret (LP optimum - reward)",
           title="Regret, mean and 95% t interval over instances")
    ax.legend(fontsize=8)
    names = ["LP every step", f"wait-less (f={f})", "first-order"]
    bx.bar(names, [timing[name]["seconds"].mean() for name in TIMED], color=["tab:gray", "tab:orange", "tab:blue"])
    bx.set(yscale="log", ylabel="wall time per instance (s)", title=f"Runtime at T={timing_T}")
    fig.tight_layout()
    return fig


def _setup(params: Params, metrics: dict) -> str:
    proposed, between = policy_names(params)
    fs = ", ".join(f"T={T}: f={f}" for T, f in metrics["f"].items())
    inst = (f"a_t ~ U[0,{params.a_high}]^m, r_t ~ U[0,{params.r_high}]" if params.instance == "uniform"
            else "a_t ~ N(1,1)^m, r_t = sum(a_t) - U[0,m]")
    return (
        f"Stochastic-input OLP, m={params.m} resources, {inst}, d_i ~ U[1/3,2/3], budget b = T d; "
        f"{params.seeds} independent instances per T in {params.horizons}. Regret = hindsight LP relaxation "
        "optimum (scipy `linprog`, HiGHS) - online reward; every policy accepts only requests that still fit.\n\n"
        f"- **first_order**: p <- max(0, p + eta (a_t x_t - d)), eta = {params.eta_scale}/sqrt(T), d = b/T, p_1 = 0.\n"
        f"- **{proposed}** (proposed; with the default settings the official code's Algorithm 1): LP on the history re-solved every f = ceil(T^{params.f_exponents[0]:.3g}) "
        f"customers ({fs}), right-hand side t * remaining/(T - t), dual price used from the next customer "
        f"(lag {params.lag}); first-order steps ({params.eta_schedule} step sizes, d {params.fo_rate}) "
        f"{'only in the first batch and the last f customers' if params.fo_mode == 'ends' else 'after every customer'}.\n"
        f"- **waitless_<f>** for the other f exponents {params.f_exponents[1:]}: the same policy with that f.\n"
        f"- **{ablation_name(params)}** (negative control of the regret claims): `{proposed}` with its LP re-solves "
        "removed: the same first-order steps in the first batch and the last f customers, the price held in "
        "between is the first batch's first-order price. Judged by the same metrics and thresholds.\n"
        f"- **{between}**: the plan's literal reading: first-order after every customer with "
        "eta = 1/sqrt(f) and the remaining-budget rate, LP price re-set every f.\n"
        f"- **lp_every_step**: the LP re-solved after every customer, only at T={params.timing_T} on "
        f"{params.timing_instances} instances; its wall time is measured in the same task as the wait-less run "
        "on the same instance (`metrics.timings`). The runtime check divides the speed-up by the ratio of LP-solve "
        "counts (a sanity check: at matched wall time per solve the speed-up is the solve count; "
        "`timings.seconds_per_lp_solve` gives the per-solve times)."
    )


def _reading(params: Params, metrics: dict) -> str:
    """The measured numbers behind the claims, for the notes (interpretation is in NOTES.md)."""
    r, c, t = metrics["regret"], metrics["control"], metrics["timings"]
    ratio = r["ratio_Tmax"]
    last = r["by_T"][str(max(params.horizons))]
    _, between = policy_names(params)
    return (f"**Measured**: regret(first-order) / regret(wait-less) at T={ratio['T']}: {ratio['ratio']:.2f} "
            f"[{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]; log-log regret slope: first-order "
            f"{r['loglog_slope_first_order']['slope']:.2f}, wait-less {r['loglog_slope']['slope']:.2f}. Control "
            f"(wait-less without LP re-solves): ratio {c['ratio_Tmax']['ratio']:.2f} [{c['ratio_Tmax']['ci_low']:.2f}, "
            f"{c['ratio_Tmax']['ci_high']:.2f}] at T={ratio['T']}, worst over T {c['ratio_worst_T']['ratio']:.2f}, "
            f"slope {c['loglog_slope']['slope']:.2f}. `{between}` regret at T={max(params.horizons)}: "
            f"{last[between]['mean']:.1f} (first-order {last['first_order']['mean']:.1f}). Runtime speed-up over "
            f"LP-every-step: {t['runtime_ratio']['mean']:.1f}x at T={metrics['lp_every_step']['T']}, solve-count "
            f"ratio {np.mean(t['solve_count_ratio']):.1f}.")
