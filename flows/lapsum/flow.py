"""LapSum as a Prefect flow: exactness and gradients of the closed-form soft top-k, CPU runtime
scaling against the baselines, learn-to-select with large k, and a top-2 loss on digits."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from flows.lapsum import method
from flows.lapsum.params import SMOKE, Params
from tasks import stats
from tasks.contract import Claim, Control, Paper, RunContext, RunOutput, ci
from tasks.data import save_bundled
from tasks.paper import over_seeds, paper_flow, run_task

BASELINES_TIMED = ("sinkhorn", "neuralsort", "softsort")  # the plan's "faster than" comparison

PAPER = Paper(
    slug="lapsum",
    title="LapSum: One Method to Differentiate Them All: Ranking, Sorting and Top-k Selection",
    method="LapSum (closed-form inverse of a sum of Laplace CDFs: soft top-k, soft rank)",
    paper_class="A",
    source="abstracts-003.txt #18",
    official_code="gmum/LapSum (GitHub; notebooks/soft_topk.ipynb, lapsum/ C++/CUDA extensions)",
    claims=(
        Claim(id="sum_equals_k",
              text="an efficient closed-form formula for the inverse of the function LapSum: "
                   "the soft top-k memberships sum to k exactly (|sum p - k| < 1e-8 in float64)",
              source="abstract; plan claim 1", metric="correctness.max_abs_sum_error",
              comparison="<", threshold=1e-8, kind="exact", role="sanity"),
        Claim(id="gradient_matches_finite_differences",
              text="losses and gradients ... computed in closed form: relative error of the closed-form "
                   "backward (d/dr, d/dk, d/dalpha) vs central finite differences < 1e-4",
              source="abstract; plan claim 1", metric="correctness.grad_rel_error_fd",
              comparison="<", threshold=1e-4, kind="exact", role="sanity"),
        Claim(id="hard_limit_integer_gaps",
              text="at alpha = 1e-3 on integer scores (gaps of 1 = 1000 alpha), L1(p, hard top-k) < 1e-2: automatic "
                   "for any Laplace relaxation; kept as a check of the log-space solve, which the plain closed form "
                   "fails there (b = +-inf)",
              source="plan claim 1; official notebook's underflow [ours]", metric="correctness.l1_to_hard_at_alpha_hard",
              comparison="<", threshold=1e-2, kind="exact", role="sanity"),
        Claim(id="hard_limit",
              text="soft top-k selection: at alpha = 1e-3 on distinct values (N(0,1) scores, n = correctness_n, "
                   "k = n/10), L1(p, hard top-k) < 1e-2 (mean over rows)",
              source="plan claim 1", metric="correctness.l1_to_hard_normal.mean",
              comparison="<", threshold=1e-2, kind="exact", role="claim",
              per_seed="correctness.l1_to_hard_normal.per_seed",
              control=Control(name="softmax relaxation k softmax(r / alpha) at the same alpha and scores",
                              metric="correctness.l1_softmax_to_hard_normal.mean")),
        Claim(id="n_log_n_scaling",
              text="losses and gradients to be computed in O(n log n) time: forward+backward CPU "
                   "time(10 n) / time(n) <= 15 at the largest decade (1e5 -> 1e6 by default)",
              source="abstract; plan claim 2", metric="timings.lapsum_time_ratio_top_decade",
              comparison="<=", threshold=15.0, kind="magnitude", role="claim",
              no_interval_reason="one CPU-time measurement per point (the minimum over scaling_reps calls), taken "
                                 "once before the seeds; thread CPU time does not depend on the seed",
              control=Control(name="SoftSort (O(nk) = O(n^2) at k = n/10) at its own largest decade",
                              metric="timings.control_softsort_time_ratio_top_decade")),
        Claim(id="faster_than_baselines",
              text="low computational and memory complexity: LapSum forward+backward (CPU time) is faster "
                   "than NeuralSort, SoftSort and Sinkhorn top-k at n = 1e4 (min speed-up > 1)",
              source="abstract; plan claim 2", metric="timings.min_speedup_at_n_compare",
              comparison=">", threshold=1.0, kind="direction", role="claim",
              no_interval_reason="one CPU-time measurement per method (the minimum over scaling_reps calls), taken "
                                 "once before the seeds",
              control=Control(name="SoftSort in place of LapSum (min speed-up over Sinkhorn and NeuralSort)",
                              metric="timings.control_softsort_min_speedup_at_n_compare")),
        Claim(id="large_k_noninferior",
              text="outperforms state-of-the-art techniques for high-dimensional vectors and large k "
                   "values: learn-to-select precision@k at k = 1000 >= best baseline - 0.01, at an equal CPU "
                   "budget per method (the plan's equal-budget protocol)",
              source="abstract; plan claim 3", metric="timings.select_budget.diff_vs_best_baseline.mean",
              comparison=">=", threshold=-0.01, kind="direction", role="claim",
              interval=ci("timings.select_budget.diff_vs_best_baseline"),
              control=Control(name="LapSum with a quarter of the budget",
                              metric="timings.select_budget.control_diff_vs_best_baseline.mean",
                              interval=ci("timings.select_budget.control_diff_vs_best_baseline"))),
    ),
    limitations=(
        "Pure-PyTorch CPU implementation on a 2-core machine: the paper's C++/CUDA kernels, its GPU "
        "runtime and memory figures, and its CIFAR-100/ImageNet top-k classification and multi-digit "
        "MNIST soft-permutation results are not reproduced. 'Outperforms for large k' is checked as "
        "non-inferiority on a synthetic learn-to-select task (n = 2,000 items, k up to 1,000, equal "
        "number of optimisation steps, one shared temperature fixed in advance, no tuning), not on the "
        "paper's benchmarks. Timings are single-threaded CPU-time minima (wall-clock reported beside them); the "
        "quadratic baselines (NeuralSort, SoftSort) are timed only up to n = 1e4 and Sinkhorn up to 1e5 "
        "(its unrolled autograd needs O(n x iterations) memory), so the speed comparison is at n = 1e4."
    ),
)


def _figure(scaling: pd.DataFrame, select: pd.DataFrame, sweep: pd.DataFrame):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for name, grp in scaling.groupby("method", sort=False):
        ax.loglog(grp["n"], grp["cpu_s"], "o-", label=name)
    ax.set(xlabel="n (k = n/10, batch 4)", ylabel="forward + backward CPU time [s]", title="A. CPU runtime scaling")
    ax.legend()
    ax = axes[1]
    agg = select.groupby(["method", "k"], sort=False)["precision_at_k"].agg(["mean", "min", "max"]).reset_index()
    for name, grp in agg.groupby("method", sort=False):
        ax.errorbar(grp["k"], grp["mean"], yerr=[grp["mean"] - grp["min"], grp["max"] - grp["mean"]],
                    fmt="o-", capsize=3, label=name)
    ceiling = select.groupby("k")["teacher_precision_at_k"].mean()
    ax.plot(ceiling.index, ceiling.values, "k--", label="noise-free scorer")
    ax.set(xscale="log", xlabel="k", ylabel="test precision@k", title="B. learn-to-select (equal steps)")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.loglog(sweep["alpha"], sweep["l1_to_hard"].clip(lower=1e-30), "o-")
    ax.set(xlabel="alpha", ylabel="L1(p, hard top-k)", title="A. hard limit (N(0,1) scores, n/10)")
    fig.tight_layout()
    return fig


@paper_flow(PAPER, Params, smoke=SMOKE)
def lapsum_flow(params: Params, ctx: RunContext) -> RunOutput:
    digits_path = str(save_bundled("digits", ctx.data_dir / "digits.parquet"))

    # Runtime scaling alone, before the seeds start, so that nothing else competes for the cores.
    scaling = pd.DataFrame(run_task(method.run_scaling, p=params))
    per_seed = over_seeds(method.run_seed, ctx.seeds, p=params, digits=digits_path)

    # --- A: correctness (worst case over seeds) and runtime scaling
    cor = [r["correctness"] for r in per_seed]
    correctness = {key: float(max(c[key] for c in cor)) for key in (
        "max_abs_sum_error", "max_abs_diff_vs_bisection", "grad_rel_error_fd", "grad_rel_error_fd_r",
        "grad_rel_error_fd_k", "grad_rel_error_fd_alpha", "grad_rel_error_vs_bisection_autograd",
        "rank_max_abs_error_vs_naive")}
    correctness["l1_to_hard_at_alpha_hard"] = float(max(c["l1_to_hard_alpha_1e-3"] for c in cor))
    for key, name in (("l1_to_hard_normal_at_alpha_hard", "l1_to_hard_normal"),
                      ("l1_softmax_to_hard_normal_at_alpha_hard", "l1_softmax_to_hard_normal")):
        values = [float(c[key]) for c in cor]
        correctness[name] = {"mean": float(sum(values) / len(values)), "per_seed": values}
    sweep = pd.DataFrame([row for c in cor for row in c["alpha_sweep_normal_scores"]]).groupby(
        "alpha", as_index=False)["l1_to_hard"].mean()
    correctness["alpha_sweep_l1_normal_scores"] = {f"alpha_{a:.0e}": float(v) for a, v in zip(sweep["alpha"], sweep["l1_to_hard"])}

    t = {(m, n): s for m, n, s in scaling[["method", "n", "cpu_s"]].itertuples(index=False)}
    w = {(m, n): s for m, n, s in scaling[["method", "n", "wall_s"]].itertuples(index=False)}
    n_hi, n_lo = sorted(params.scaling_ns)[-1], sorted(params.scaling_ns)[-2]
    lap = scaling[scaling["method"] == "lapsum"]
    speedups = {m: t[m, params.n_compare] / t["lapsum", params.n_compare]
                for m in BASELINES_TIMED if (m, params.n_compare) in t}
    timings = {
        "scaling_cpu_s": {m: {str(n): float(s) for n, s in zip(g["n"], g["cpu_s"])}
                          for m, g in scaling.groupby("method", sort=False)},
        "scaling_wall_s": {m: {str(n): float(s) for n, s in zip(g["n"], g["wall_s"])}
                           for m, g in scaling.groupby("method", sort=False)},
        "lapsum_time_ratio_top_decade": float(t["lapsum", n_hi] / t["lapsum", n_lo]),
        "lapsum_wall_ratio_top_decade": float(w["lapsum", n_hi] / w["lapsum", n_lo]),
        "lapsum_loglog_slope": stats.loglog_slope(lap["n"], lap["cpu_s"]),
        "speedup_at_n_compare": speedups,
        "min_speedup_at_n_compare": float(min(speedups.values())) if speedups else float("nan"),
        "wall_speedup_at_n_compare": {m: w[m, params.n_compare] / w["lapsum", params.n_compare]
                                      for m in BASELINES_TIMED if (m, params.n_compare) in w},
    }
    # Negative controls of the runtime claims: SoftSort, quadratic at k = n/10, in LapSum's place.
    soft_ns = sorted(n for m, n in t if m == "softsort")
    timings["control_softsort_time_ratio_top_decade"] = (
        float(t["softsort", soft_ns[-1]] / t["softsort", soft_ns[-2]]) if len(soft_ns) >= 2 else float("nan"))
    others = [m for m in BASELINES_TIMED if m != "softsort" and (m, params.n_compare) in t]
    timings["control_softsort_min_speedup_at_n_compare"] = (
        float(min(t[m, params.n_compare] / t["softsort", params.n_compare] for m in others))
        if others and ("softsort", params.n_compare) in t else float("nan"))

    # --- B: learn-to-select
    select = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["select"]])
    prec = {(m, k): g.sort_values("seed")["precision_at_k"].to_numpy() for (m, k), g in select.groupby(["method", "k"])}
    select_metrics: dict = {f"k{k}": {m: stats.summarize(prec[m, k]) for m in params.methods} for k in params.select_ks}
    for k in params.select_ks:
        select_metrics[f"k{k}"]["noise_free_scorer"] = float(select[select["k"] == k]["teacher_precision_at_k"].mean())
    k_big = max(params.select_ks)
    baselines = [m for m in params.methods if m != "lapsum"]
    best = max(baselines, key=lambda m: prec[m, k_big].mean())
    select_metrics["large_k"] = {"k": k_big, "best_baseline": best,
                                 "diff_vs_best_baseline": stats.paired_difference(prec["lapsum", k_big], prec[best, k_big])}
    # Equal CPU budget at the largest k (the claim): LapSum and its quarter-budget control vs the best baseline.
    budget = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["select_budget"]])
    full = budget[budget["budget"] == "full"]
    bprec = {m: g.sort_values("seed")["precision_at_k"].to_numpy() for m, g in full.groupby("method")}
    control = budget[budget["budget"] == "control"].sort_values("seed")["precision_at_k"].to_numpy()
    best_b = max(baselines, key=lambda m: bprec[m].mean())
    timings["select_budget"] = {
        "k": k_big, "budget_s": params.select_budget_s, "best_baseline": best_b,
        "precision_at_k": {m: stats.summarize(bprec[m]) for m in params.methods},
        "control_precision_at_k": stats.summarize(control),
        "steps": {m: float(g["steps"].mean()) for m, g in full.groupby("method")},
        "control_steps": float(budget[budget["budget"] == "control"]["steps"].mean()),
        "diff_vs_best_baseline": stats.paired_difference(bprec["lapsum"], bprec[best_b]),
        "control_diff_vs_best_baseline": stats.paired_difference(control, bprec[best_b])}
    timings["select_wall_s"] = {f"k{k}": {m: float(select[(select["k"] == k) & (select["method"] == m)]["wall_s"].mean())
                                          for m in params.methods} for k in params.select_ks}

    # --- C: digits
    digits = pd.DataFrame([{"seed": r["seed"], **row} for r in per_seed for row in r["digits"]])
    digits_metrics = {loss: {col: stats.summarize(g[col].to_numpy()) for col in ("top1_acc", "top2_acc")}
                      for loss, g in digits.groupby("loss")}

    plot = scaling.rename(columns={"n": "x", "cpu_s": "y", "method": "series"})[["x", "y", "series"]]
    diff = select_metrics["large_k"]["diff_vs_best_baseline"]
    tb = timings["select_budget"]
    bd, bc = tb["diff_vs_best_baseline"], tb["control_diff_vs_best_baseline"]
    setup = (
        f"**A. Correctness** (float64, {params.seeds} seeds): 8 random batches of 4 x {params.correctness_n} scores "
        "(scales 1e-2..1e2, k uniform in (1, n-1), alpha in 1e-2..10); Jacobians in r, k, alpha of the closed-form "
        "backward vs central differences (h = 1e-6) and vs autograd of an independent bisection + Newton-step "
        f"reference; hard limit at alpha = {params.alpha_hard:g} on a random permutation of 0..n-1 (gaps 1), k = n/10.\n\n"
        f"**A. Scaling**: forward+backward of a batch of {params.scaling_batch} float32 rows, k = n/10, n in "
        f"{params.scaling_ns}, {params.timing_threads} torch thread(s), CPU time (and wall-clock, reported) as the "
        f"minimum of {params.scaling_reps} calls after a warm-up; NeuralSort/SoftSort up to n = {params.quadratic_cap}, Sinkhorn ({params.sinkhorn_iter_timing} "
        f"iterations) up to n = {params.sinkhorn_cap}.\n\n"
        f"**B. Learn-to-select**: instances of n = {params.select_n} items with 16-dim N(0, I) features; the true "
        f"score is a hidden random tanh MLP (16-32-1, unit std) plus N(0, {params.select_noise}^2) noise; target = "
        f"membership of its top-k, k in {params.select_ks}. A 16-{params.select_hidden}-1 ReLU MLP is trained through "
        f"each soft top-k ({', '.join(params.methods)}) with BCE for {params.select_steps} Adam steps (lr "
        f"{params.select_lr:g}, {params.select_batch} fresh instances per step), same init and instances for every "
        f"method; shared temperature tau = {params.tau:g} (Sinkhorn eps = 2 tau, {params.sinkhorn_iter_train} "
        "iterations). Metric: precision@k of the hard top-k of the learned scores on 8 held-out instances. "
        f"**Equal budget** (the large-k claim): at k = {k_big} every method trains on the same instance stream until "
        f"it has used {params.select_budget_s:g} s of one-thread CPU time (the plan's equal wall-clock protocol); the "
        f"negative control is LapSum with {params.control_budget_frac:g} of that budget. Mean steps taken: "
        + ", ".join(f"{m} {v:.0f}" for m, v in timings["select_budget"]["steps"].items())
        + f", control {timings['select_budget']['control_steps']:.0f}.\n\n"
        f"**C. Digits**: linear classifier on standardised `load_digits` (70/30 split per seed), {params.digits_steps} "
        f"full-batch Adam steps, cross-entropy vs the LapSum top-2 loss -log p_y with p = soft top-2 "
        f"(alpha = {params.digits_alpha:g}). Reported, not gated: "
        + ", ".join(f"{loss}: top-1 {v['top1_acc']['mean']:.3f}, top-2 {v['top2_acc']['mean']:.3f}"
                    for loss, v in digits_metrics.items()) + "."
    )
    notes = (
        "- **CPU time for the runtime claims.** Timings run on one torch thread and the claims use that thread's "
        "CPU time (`time.thread_time`; CPU autograd runs on the calling thread); wall-clock times are reported "
        "beside them (`timings.scaling_wall_s`). On the shared 2-core development machine the wall-clock ratio "
        "time(1e6)/time(1e5) of LapSum ranged from about 11 (idle) to 21 (load average 6), while its CPU-time "
        "ratio does not depend on other processes.\n"
        "- **The large-k claim at an equal CPU budget, not at equal steps.** At equal steps (60) every method except "
        f"NeuralSort ended within 0.02 of the noise-free ceiling at k = {k_big} (the previous run: 0.894-0.897 against "
        "0.91), where any soft top-k is non-inferior and the check has no power. The claim is now decided as the plan "
        "set it, at an equal compute budget (the plan: 20 s of wall-clock per method; here one-thread CPU time, so "
        f"other processes do not change the budget), of {params.select_budget_s:g} s per method and seed: about "
        "LapSum's wall time for its 60 steps in the previous run (0.55 s), meant to stop short of the point where every "
        "method reaches the ceiling (chosen before this run; not tuned; one-thread CPU time turned out cheaper per "
        f"step than that wall time, so LapSum took about {tb['steps'].get('lapsum', float('nan')):.0f} steps). Its negative control, LapSum with a quarter of the budget, must fall "
        "short of the best baseline, else the check has no power. These metrics depend on the machine's speed and "
        "so live under `timings.select_budget` (outside the determinism check).\n"
        f"- Equal budget, k = {k_big}: the best baseline is **{tb['best_baseline']}**; LapSum - {tb['best_baseline']} = "
        f"{bd['mean']:+.4f} [{bd['ci_low']:+.4f}, {bd['ci_high']:+.4f}]; quarter-budget LapSum - {tb['best_baseline']} = "
        f"{bc['mean']:+.4f} [{bc['ci_low']:+.4f}, {bc['ci_high']:+.4f}] (paired over seeds).\n"
        f"- Equal steps (reported, not gated): at k = {k_big} the best baseline by mean precision is **{best}**; "
        f"LapSum - {best} = {diff['mean']:+.4f} [{diff['ci_low']:+.4f}, {diff['ci_high']:+.4f}] (paired over seeds). "
        "Equal steps keep `select.*` deterministic given the params; wall times are under `timings.select_wall_s`.\n"
        "- The closed-form inverse follows the official notebook (sort, two logcumsumexp passes, searchsorted, "
        "quadratic in e^b) but takes log z = log(sqrt(c)) + asinh(|e|/sqrt(c)) in log space: the notebook's "
        "z = |e| + sqrt(e^2 + ab e^(s-t)) underflows to 0 when alpha is small and k is an integer "
        "(b = +-inf, all p = 0 or 1), which the hard-limit check would expose.\n"
        "- The closed-form backward (grad r, k, alpha) matches the official notebook's formulas; derived "
        "independently by implicit differentiation of sum_i F(r_i/alpha - b) = k.\n"
        "- Soft rank is the official `soft_rank.cpp` definition rank_i = sum_{j != i} F((r_i - r_j)/alpha), "
        "computed in O(n log n) from the same prefix sums (autograd through sort/logcumsumexp); soft sort and "
        "soft permutation are not implemented.\n"
        "- NeuralSort and SoftSort are our own short torch implementations, checked against `difftopk` 0.2.0 in "
        "the tests: `difftopk.NeuralSort` hard-codes float32 and builds all n rows with an n x n x n matmul "
        "(O(n^3)), which cannot run at n = 1e4. Ours builds only the k rows top-k needs and computes A_s 1 "
        "exactly by sorting, which makes the baselines faster, not slower.\n"
        "- Softmax relaxation = k * softmax(r / tau) (sums to k, entries may exceed 1); NeuralSort/SoftSort "
        "memberships may also exceed 1; all are clamped to [1e-6, 1 - 1e-6] before the BCE. Sinkhorn top-k is "
        "Xie et al. 2020 with anchors {0, 1} and cost (r - y)^2 on the raw scores (no rescaling [ours]).\n"
        "- One temperature for all methods was fixed before any run and not tuned. With tau = 1 NeuralSort's "
        "logits scale with n (the (n + 1 - 2i) factor) and it trains poorly at n = 2,000 (below chance, k/n, at k = 200 in the previous run) (its memberships match "
        "`difftopk.NeuralSort` in the tests, so this is the temperature, not the code); the claim compares "
        "LapSum with the best baseline, so this does not make it easier.\n"
        "- **Hard limit.** On integer scores (gaps of 1 = 1000 alpha) the L1 distance to the hard top-k is about "
        "1e-218 for any Laplace relaxation, so that case is now a sanity check (of the log-space solve). The claim is "
        f"checked on N(0,1) scores (n = {params.correctness_n}, k = n/10, mean L1 over 4 rows per seed), where the gaps "
        "near the k-th value are comparable to alpha; the negative control is the softmax relaxation at the same "
        "temperature, which also sums to k but is not a top-k. The full alpha sweep on these scores is "
        "`correctness.alpha_sweep_l1_normal_scores`. The mean over rows is dominated by the rare rows whose two scores "
        "around the k-th value are closer than a few alpha."
    )
    metrics = {"correctness": correctness, "select": select_metrics, "digits": digits_metrics, "timings": timings}
    tables = {"plot": plot, "scaling": scaling, "select": select.drop(columns="wall_s"), "digits": digits,
              "alpha_sweep": sweep}
    return RunOutput(metrics=metrics, tables=tables, figure=_figure(scaling, select, sweep), setup=setup, notes=notes)
