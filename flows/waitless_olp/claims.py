"""The claims of Wait-less OLP, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

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
