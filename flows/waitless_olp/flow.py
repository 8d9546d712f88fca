"""Wait-less OLP as a Prefect flow: regret of first-order vs wait-less over T, runtime vs LP-every-step."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from flows.waitless_olp import method
from flows.waitless_olp.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_parquet
from tasks.paper import over_seeds, paper_flow, run_task


def policy_names(params: Params) -> tuple[str, str]:
    """Row names of the headline wait-less policy and of the plan's literal variant (first f exponent)."""
    tag = method.exponent_tag(params.f_exponents[0])
    return f"waitless_{tag}", f"waitless_between_{tag}"


def ablation_name(params: Params) -> str:
    """Row name of the negative control: the headline wait-less policy without its LP re-solves."""
    return f"waitless_nolp_{method.exponent_tag(params.f_exponents[0])}"


# The negative control of every regret claim: the same policy, same instances, same metric, with the LP
# re-solves removed. If it also beat first-order by the claimed margin, the LPs would not be what wins.
ABLATION = "wait-less without LP re-solves (ablation)"


PAPER = Paper(
    slug="waitless_olp",
    title="Wait-Less Offline Tuning and Re-solving for Online Decision Making",
    method="Wait-less OLP: LP re-solve every f customers + first-order dual updates (parallel multi-phase)",
    paper_class="A",
    source="abstracts-000.txt #9",
    official_code="Jingruo/Wait-Less-Online-Decision-Making (GitHub, MATLAB + Gurobi)",
    claims=(
        Claim(id="regret_10x_first_order",
              text="Extensive experiments demonstrate at least 10-fold improvements in regret over first-order methods",
              source="abstract", metric="regret.ratio_Tmax.ratio", comparison=">=", threshold=10.0,
              kind="magnitude", role="claim", interval=ci("regret.ratio_Tmax"),
              control=Control(name=ABLATION, metric="control.ratio_Tmax.ratio",
                              interval=ci("control.ratio_Tmax")),
              scaled="threshold as in the paper, but checked at the largest T of the run (8,000 by "
                     "default) instead of the paper's horizons up to 1e6; the ratio grows with T"),
        Claim(id="regret_below_first_order_every_t",
              text="... improvements in regret over first-order methods (direction: ratio > 1 at every T)",
              source="abstract; plan claim 1 (direction)", metric="regret.ratio_worst_T.ratio",
              comparison=">", threshold=1.0, kind="direction", role="claim",
              interval=ci("regret.ratio_worst_T"),
              control=Control(name=ABLATION, metric="control.ratio_worst_T.ratio",
                              interval=ci("control.ratio_worst_T")),
              per_setting="regret.ratio_by_T_point"),
        Claim(id="runtime_speedup_is_solve_count",
              text="relabelled from the abstract's '100-fold improvements in runtime over LP-based methods': "
                   "the measured speed-up over LP-every-step, divided by the ratio of LP-solve counts "
                   "(T-1 against T/f-1), is >= 0.5, i.e. the speed-up is the count of LP solves at matched wall "
                   "time per solve. That holds by construction of the schedule, so it checks our timing, not "
                   "the paper (whose 100x needs f >= 100, T >= 10,000: out of reach here)",
              source="abstract (relabelled)", metric="timings.runtime_ratio_over_solve_ratio.mean",
              comparison=">=", threshold=0.5, kind="magnitude", role="sanity",
              interval=("timings.runtime_ratio_over_solve_ratio.min", "timings.runtime_ratio_over_solve_ratio.max")),
        Claim(id="regret_sublinear_sqrt",
              text="Our algorithm achieves O(log(T/f) + sqrt(f)) regret (with f = sqrt(T): growth below sqrt(T))",
              source="abstract; plan claim 3", metric="regret.loglog_slope.slope", comparison="<=",
              threshold=0.5, kind="direction",
              role="claim", interval=ci("regret.loglog_slope"),
              control=Control(name=ABLATION, metric="control.loglog_slope.slope",
                              interval=ci("control.loglog_slope"))),
        Claim(id="lp_bounds_every_policy",
              text="regret is measured against the hindsight LP optimum, an upper bound on any online reward",
              source="problem definition", metric="regret.min_regret", comparison=">=", threshold=-1e-6,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "Synthetic stochastic-input instances with m = 5 resources and T up to 8,000 customers, 5 instances "
        "per T; the paper goes to T = 1e6 (its official script uses m = 1) with 100 instances. At this scale "
        "the regret gap to first-order methods is smaller than asymptotically (first-order regret grows like "
        "sqrt(T), wait-less like log(T/f) + sqrt(f) = O(T^(1/4)) with f = sqrt(T)), and the runtime advantage "
        "is bounded by f (about 32 at T = 1,000): the paper's 100x runtime claim is not checked (it needs "
        "f >= 100, T >= 10,000, where LP-every-step costs ~10^4 solves of up to 10^4 rows per instance); the "
        "runtime check that remains is a sanity check that the speed-up is the LP-solve count. Wall times "
        "are scipy/HiGHS on a shared 2-core machine, not Gurobi; the 'parallel' LP solve of the paper is "
        "simulated sequentially (its price is used from the next customer on, lag 0 as in the official code), "
        "so the runtime compares total compute, not decision latency."
    ),
)


@paper_flow(PAPER, Params, smoke=SMOKE)
def waitless_olp_flow(params: Params, ctx: RunContext) -> RunOutput:
    proposed, _ = policy_names(params)
    instances, budgets = run_task(method.instance_tables, p=params, seeds=ctx.seeds)
    save_parquet(instances, ctx.data_dir / "instances.parquet")
    save_parquet(budgets, ctx.data_dir / "budgets.parquet")
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params)
    # The timed instances run one after the other in a single task, after the seeds: wall times compare.
    timing = run_task(method.run_timings, p=params, seeds=ctx.seeds[:params.timing_instances])

    rows = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["rows"]]).drop(columns="seconds")
    Ts = sorted(params.horizons)
    policies = list(dict.fromkeys(rows["policy"]))
    regret = {(T, p): rows[(rows["T"] == T) & (rows["policy"] == p)].sort_values("seed")["regret"].to_numpy()
              for T in Ts for p in policies}

    by_T = stats.summarize_by(rows.sort_values(["T", "seed"], kind="stable"), ["T", "policy"], "regret")
    ratio_by_T = {str(T): stats.ratio_of_means(regret[T, "first_order"], regret[T, proposed]) for T in Ts}
    worst = min(ratio_by_T, key=lambda T: ratio_by_T[T]["ci_low"])
    ablation = ablation_name(params)
    slopes = {p: stats.loglog_slope_ci(Ts, np.array([regret[T, p] for T in Ts]))
              for p in ("first_order", proposed, ablation)}
    control_by_T = {str(T): stats.ratio_of_means(regret[T, "first_order"], regret[T, ablation]) for T in Ts}
    control_worst = min(control_by_T, key=lambda T: control_by_T[T]["ci_low"])

    lp_s = np.array([t["lp_every_step"]["seconds"] for t in timing])
    wl_s = np.array([t["waitless"]["seconds"] for t in timing])
    f_timing = timing[0]["f"]
    speedup = lp_s / wl_s
    # The speed-up expected from the solve counts alone (T-1 solves against T/f-1): the runtime check divides by it.
    solve_ratio = np.array([t["lp_every_step"]["n_lp"] / t["waitless"]["n_lp"] for t in timing])
    per_solve = {name: [t[name]["lp_seconds"] / t[name]["n_lp"] for t in timing] for name in ("lp_every_step", "waitless")}
    metrics = {
        "f": {str(T): method.resolve_frequency(T, params.f_exponents[0]) for T in Ts},
        "regret": {
            "by_T": by_T,
            "ratio_by_T": ratio_by_T,
            "ratio_Tmax": {**ratio_by_T[str(Ts[-1])], "T": Ts[-1]},
            "ratio_worst_T": {**ratio_by_T[worst], "T": int(worst)},
            "loglog_slope": slopes[proposed],
            "loglog_slope_first_order": slopes["first_order"],
            "ratio_by_T_point": {T: r["ratio"] for T, r in ratio_by_T.items()},
            "min_regret": float(rows["regret"].min()),
        },
        "control": {  # the ablation without LP re-solves, judged by the same metrics
            "policy": ablation,
            "ratio_by_T": control_by_T,
            "ratio_Tmax": {**control_by_T[str(Ts[-1])], "T": Ts[-1]},
            "ratio_worst_T": {**control_by_T[control_worst], "T": int(control_worst)},
            "loglog_slope": slopes[ablation],
        },
        "lp_every_step": {
            "T": params.timing_T, "f": f_timing, "instances": len(timing),
            **{name: stats.summarize([t[name]["regret"] for t in timing])
               for name in ("lp_every_step", "waitless", "first_order")},
            "n_lp": {name: timing[0][name]["n_lp"] for name in ("lp_every_step", "waitless")},
        },
        "timings": {
            "lp_every_step_s": lp_s.tolist(), "waitless_s": wl_s.tolist(),
            "first_order_s": [t["first_order"]["seconds"] for t in timing],
            "runtime_ratio": {"mean": float(speedup.mean()), "min": float(speedup.min()), "max": float(speedup.max())},
            "runtime_ratio_over_f": {"mean": float(speedup.mean() / f_timing), "min": float(speedup.min() / f_timing),
                                     "max": float(speedup.max() / f_timing)},
            "solve_count_ratio": solve_ratio.tolist(),
            "runtime_ratio_over_solve_ratio": {"mean": float((speedup / solve_ratio).mean()),
                                               "min": float((speedup / solve_ratio).min()),
                                               "max": float((speedup / solve_ratio).max())},
            "seconds_per_lp_solve": {name: {"mean": float(np.mean(v)), "values": v} for name, v in per_solve.items()},
        },
    }

    plot = pd.DataFrame([{"x": T, "y": by_T[str(T)][p]["mean"], "y_low": by_T[str(T)][p]["ci_low"],
                          "y_high": by_T[str(T)][p]["ci_high"], "series": p} for p in policies for T in Ts])
    lp_point = metrics["lp_every_step"]["lp_every_step"]
    plot = pd.concat([plot, pd.DataFrame([{"x": params.timing_T, "y": lp_point["mean"], "y_low": lp_point["ci_low"],
                                           "y_high": lp_point["ci_high"], "series": "lp_every_step"}])],
                     ignore_index=True)
    return RunOutput(metrics=metrics, tables={"plot": plot, "regret": rows},
                     figure=_figure(plot, lp_s, wl_s, timing, params.timing_T),
                     setup=_setup(params, metrics), notes=_notes(params, metrics))


def _figure(plot: pd.DataFrame, lp_s: np.ndarray, wl_s: np.ndarray, timing: list[dict], timing_T: int):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for series, g in plot.groupby("series", sort=False):
        ax.errorbar(g["x"], g["y"], yerr=[g["y"] - g["y_low"], g["y_high"] - g["y"]], marker="o", capsize=3,
                    label=series, linestyle="none" if len(g) == 1 else "-")
    ax.set(xscale="log", yscale="log", xlabel="T (customers)", ylabel="regret (LP optimum - reward)",
           title="Regret, mean and 95% bootstrap CI over instances")
    ax.legend(fontsize=8)
    fo_s = np.array([t["first_order"]["seconds"] for t in timing])
    names = ["LP every step", f"wait-less (f={timing[0]['f']})", "first-order"]
    bx.bar(names, [lp_s.mean(), wl_s.mean(), fo_s.mean()], color=["tab:gray", "tab:orange", "tab:blue"])
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


def _notes(params: Params, metrics: dict) -> str:
    r = metrics["regret"]
    last = r["by_T"][str(max(params.horizons))]
    _, between = policy_names(params)
    return (
        "**Official code found** (github.com/Jingruo/Wait-Less-Online-Decision-Making, MATLAB + Gurobi); the "
        "plan had marked none. What it settles, and where this flow follows it:\n"
        "- Re-solve frequency f = ceil(sqrt(T)) (Algorithm 1); LP on the customers seen so far with "
        "right-hand side (remaining budget) * t/(T - t), i.e. the remaining-budget rate; the price is the "
        "LP's dual (Gurobi `pi`, here HiGHS marginals) clipped at 0, used from the next customer on (no lag).\n"
        "- Algorithm 1 (`main 1`, the headline here) runs first-order steps only in the first batch (no LP "
        "price yet; step 2/(t+1)^(2/3)) and the last f customers (step 1/f^(2/3)), with d = b/T, and holds "
        "the LP price in between. Its Algorithm 2 uses f = ceil(T^(1/3)) and first-order steps after every "
        "customer with steps ~t^(-2/3) and T^(-2/3). The plan's reading (eta = 1/sqrt(f) after every "
        f"customer, remaining-budget rate) is run as `{between}` for comparison; its regret at "
        f"T={max(params.horizons)} is {last[between]['mean']:.1f} against {last['first_order']['mean']:.1f} for "
        "first-order and the steps it takes are much larger than the official code's.\n"
        "- First-order baseline: eta = 1/sqrt(T), d = b/T, p_1 = 0 (official `olpsubgrad`).\n"
        "- Instances: official data type 1 (a ~ U[0,2], r ~ U[0,2], d ~ U[1/3,2/3]) rather than the plan's "
        "U[0,1]; type 2 is `instance: correlated`. The official script uses m = 1 and T = 100..1e6; the plan's "
        "m = 5 and T up to 8,000 are kept.\n\n"
        "**Deviations**: the official code lets policies overdraw resources and adds ||(Ax - b)^+|| to the "
        "regret; here a request is accepted only if it still fits (regret has no penalty term). Wall times are "
        "HiGHS through scipy (presolve off), not Gurobi.\n\n"
        "**Not confirmed** (the paper's full text was not readable here, only the abstract, summaries and the "
        "code): the exact step-size constants the paper's theory uses (the code defines 1/sqrt(f) but "
        "overwrites it), whether the paper's experiments delay the LP price by one interval (the code does "
        "not), and which of the code's two algorithms produced each figure of the paper.\n\n"
        + _reading(metrics)
    )


def _reading(metrics: dict) -> str:
    r = metrics["regret"]
    ratio, fo, wl = r["ratio_Tmax"], r["loglog_slope_first_order"]["slope"], r["loglog_slope"]["slope"]
    c = metrics["control"]
    text = (f"**Reading the claims**: regret(first-order) / regret(wait-less) at T={ratio['T']} is "
            f"{ratio['ratio']:.2f} [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]; in log T, first-order regret "
            f"grows with slope {fo:.2f} and wait-less regret with slope {wl:.2f}. The control (wait-less without "
            f"its LP re-solves) has ratio {c['ratio_Tmax']['ratio']:.2f} [{c['ratio_Tmax']['ci_low']:.2f}, "
            f"{c['ratio_Tmax']['ci_high']:.2f}] at T={ratio['T']}, worst over T {c['ratio_worst_T']['ratio']:.2f}, "
            f"and regret slope {c['loglog_slope']['slope']:.2f}. The runtime speed-up over LP-every-step is "
            f"{metrics['timings']['runtime_ratio']['mean']:.1f}x at T={metrics['lp_every_step']['T']} against a "
            f"solve-count ratio of {np.mean(metrics['timings']['solve_count_ratio']):.1f}: the paper's 100x runtime "
            "claim is not checked at this scale.")
    if ratio["ci_high"] < 10 and fo > wl:
        text += (" The gap widens with T here, and the official script's horizons reach T = 1e6, far beyond "
                 "this run; whether it reaches 10x there is not something this run can extrapolate, and below "
                 "10x at this T does not contradict the direction of the claim.")
    return text
