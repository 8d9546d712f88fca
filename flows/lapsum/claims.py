"""The claims of LapSum, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci


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
              no_interval_reason="one CPU-time measurement per point (the minimum over scaling_reps rounds, each "
                                 "timing every method and size side by side), taken once before the seeds; "
                                 "thread CPU time does not depend on the seed",
              control=Control(name="SoftSort (O(nk) = O(n^2) at k = n/10) at its own largest decade",
                              metric="timings.control_softsort_time_ratio_top_decade")),
        Claim(id="faster_than_baselines",
              text="low computational and memory complexity: LapSum forward+backward (CPU time) is faster "
                   "than NeuralSort, SoftSort and Sinkhorn top-k at n = 1e4 (min speed-up > 1)",
              source="abstract; plan claim 2", metric="timings.min_speedup_at_n_compare",
              comparison=">", threshold=1.0, kind="direction", role="claim",
              no_interval_reason="one CPU-time measurement per method (the minimum over scaling_reps "
                                 "interleaved rounds), taken once before the seeds",
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
