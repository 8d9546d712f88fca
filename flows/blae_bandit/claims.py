"""The claims of BLAE, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

LABEL = {"blae": "BLAE", "e4": "E4", "phased_elim": "PhaElimD (unreg. G-design)", "rs_oful": "rs-OFUL",
         "linucb": "LinUCB (sequential)", "blae_no_elim": "BLAE without elimination (control)"}
# The negative control of the regret claims.
NO_ELIM = "BLAE without elimination (pure exploration with BLAE's designs)"


def _ratio_claim(inst: str, baseline: str, where: str, against: str) -> Claim:
    key = f"ratio.{inst}.{baseline}"
    return Claim(
        id=f"blae_le_{baseline}_{inst}",
        text=("BLAE demonstrates low computational overhead and strong empirical performance, outperforming "
              f"state-of-the-art methods: mean regret(BLAE) / mean regret({against}) <= 1 at the largest T on {where}"),
        source="abstract; plan claim 1 (direction)", metric=f"{key}.ratio", comparison="<=",
        threshold=1.0, kind="direction", role="claim", interval=ci(f"{key}"),
        # E4 that never stops (Chernoff test) explores to T: a comparison with it measures its failure
        censored=f"diagnostics.e4_censored.{inst}" if baseline == "e4" else None,
        control=Control(name=f"{NO_ELIM} / the same baseline", metric=f"{key}.control.ratio",
                        interval=ci(f"{key}.control")))


PAPER = Paper(
    slug="blae_bandit",
    title="Optimal and Practical Batched Linear Bandit Algorithm",
    method="BLAE: batched linear bandit with arm elimination and regularized G-optimal design",
    paper_class="A",
    source="abstracts-004.txt #6",
    official_code="none found; E4 baseline after panxulab/optimal-batched-linear-bandits (GitHub)",
    claims=(
        _ratio_claim("random", "strongest", "random instances (K = 50, d = 20)",
                     "the strongest working batched baseline: the largest ratio over PhaElimD, rs-OFUL, and E4 "
                     "where its Chernoff test stops in at least half the runs (with the official gamma = 10 it "
                     "never stops there and explores to T, so it is reported as degenerate, not compared)"),
        _ratio_claim("eoo", "e4", "the End-of-Optimism instance (eps = 0.2)", LABEL["e4"]),
        _ratio_claim("eoo", "phased_elim", "the End-of-Optimism instance (eps = 0.2)", LABEL["phased_elim"]),
        Claim(id="batches_loglog",
              text="while using only O(log log T) batches: BLAE uses at most ceil(log2 log2 T) + 2 batches at "
                   "every horizon, instance and seed (max over runs of batches - bound <= 0). Sanity: the batch "
                   "grid has ceil(log2 log2 T) + 1 batches by construction",
              source="abstract; plan claim 2", metric="batch_check.max_excess", comparison="<=", threshold=0.0,
              kind="exact", role="sanity"),
        Claim(id="regret_rate_lower",
              text="achieving the minimax optimal regret (up to logarithmic factors in T): log-log slope of "
                   "BLAE's mean regret vs T over the horizons >= 0.35 (sqrt(T) scaling; random instances)",
              source="abstract; plan claim 3 (magnitude)", metric="slope.random.blae.slope", comparison=">=",
              threshold=0.35, kind="magnitude", role="claim",
              interval=ci("slope.random.blae"),
              control=Control(name="BLAE on End of Optimism (fixed gaps: a log T, not sqrt(T), regime)",
                              metric="slope.eoo.blae.slope", interval=ci("slope.eoo.blae"))),
        Claim(id="regret_rate_upper",
              text="achieving the minimax optimal regret (up to logarithmic factors in T): log-log slope of "
                   "BLAE's mean regret vs T over the horizons <= 0.65 (sqrt(T) scaling; random instances)",
              source="abstract; plan claim 3 (magnitude)", metric="slope.random.blae.slope", comparison="<=",
              threshold=0.65, kind="magnitude", role="claim",
              interval=ci("slope.random.blae"),
              control=Control(name=f"{NO_ELIM} (linear regret)", metric="slope.random.blae_no_elim.slope",
                              interval=ci("slope.random.blae_no_elim"))),
        Claim(id="faster_than_e4",
              text="BLAE demonstrates low computational overhead: CPU time of BLAE / CPU time of E4 < 1 "
                   "(per seed, summed over instances and horizons; ratio of means over seeds)",
              source="abstract; plan claim 3 (direction)", metric="timings.blae_over_e4.ratio", comparison="<",
              threshold=1.0, kind="direction", role="claim",
              interval=ci("timings.blae_over_e4"),
              per_setting="timings.blae_over_e4_by_instance",
              control=Control(name="A/A: E4 re-run (same pulls) just before BLAE / E4",
                              metric="timings.e4_rerun_over_e4.ratio",
                              interval=ci("timings.e4_rerun_over_e4"))),
    ),
    limitations=(
        "Synthetic linear bandits with Gaussian noise (sigma = 1), as in the paper: random instances "
        "(K = 50, d = 20, a fresh instance per seed) and the End-of-Optimism instance (d = 2, K = 3), T up to "
        "1e5 and 20 seeds. The paper's full text and code were not readable here, so BLAE's constants (batch "
        "grid, design regulariser lambda/T_l, elimination width) follow the plan and are unverified, and its "
        "regularized G-optimal design is computed through its Kiefer-Wolfowitz (log-det) form, which "
        "guarantees max ||x||^2 <= d but is not the exact minimiser of the regularized G-criterion. E4 is a "
        "reimplementation (allocation solved by a smoothed Frank-Wolfe instead of an SCS SDP) with the "
        "official code's constants, under which a failed Chernoff test explores up to T. At these horizons "
        "with d = 20 many arms survive elimination (metrics.diagnostics), so regret is far from its asymptotic "
        "rate and the sqrt(T) slope check is pre-asymptotic. Wall-clock times are of these NumPy implementations on a shared "
        "2-core machine (seeds run in parallel threads), not of the authors' code."
    ),
)
