"""The claims of Rethinking Aleatoric and Epistemic Uncertainty, fixed before any run: each names a metric of
``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci


def _ratio_claim(problem: str, est: str) -> Claim:
    # A sanity check, not the paper's claim: "error at n = 1 >= 10x error at n = 1000" holds for any consistent
    # estimator, so it cannot tell a poor estimator from a good one (the 'poor' part is the magnitude claims).
    return Claim(
        id=f"poor_small_n_{problem}_{est}",
        text=(f"consistency check: in the {problem} problem the mean squared error {est} at n = 1 is >= 10x its "
              "value at n = 1000 (ratio of seed means); any consistent estimator passes, so this does not test the "
              "paper's 'poor estimators' claim"),
        source="plan claim 1 (magnitude); sanity under the verdict rules", metric=f"errors.{problem}.{est}.ratio_first_over_last.ratio",
        comparison=">=", threshold=10.0, kind="magnitude", role="sanity",
        interval=ci(f"errors.{problem}.{est}.ratio_first_over_last"))


def _monotone_claim(problem: str) -> Claim:
    return Claim(
        id=f"error_decreases_{problem}",
        text=(f"the mean squared error of both estimators decreases monotonically in n in the {problem} problem "
              "(number of increases between consecutive n, over both estimators, <= 0)"),
        source="plan claim 1 (direction)", metric=f"errors.{problem}.n_increases", comparison="<=", threshold=0.0,
        kind="direction", role="claim",
        no_interval_reason=("a property of the seed-mean error curve; a single seed's curve is one data draw, whose "
                            "squared error is not monotone in n even for an exact posterior"),
        control_reason=("no estimator exists for which the claim is wrong and the metric can show it: an estimator "
                        "that ignores the data has a flat error curve, which ties the threshold (0 increases); the "
                        "claim is kept because it can fail on the paper's own estimators (the discrete eps_theta "
                        "is not monotone)"))


def _bald_claim(n: int) -> Claim:
    return Claim(
        id=f"bald_error_nonnegligible_n{n}",
        text=(f"at n = {n} the BALD vs true-parameter-EIG squared error is > 0.001 nats^2 in the discrete problem "
              "(non-negligible exactly where BALD is used)"),
        source="plan claim 2 (magnitude)", metric=f"errors.discrete.eps_theta.by_n.{n}.mean", comparison=">",
        threshold=0.001, kind="magnitude", role="claim",
        interval=ci(f"errors.discrete.eps_theta.by_n.{n}"),
        # the same error with plenty of data, where BALD is expected to be accurate: if it also exceeded the
        # threshold, the threshold would not single out small n
        control=Control(name="the same error at the largest n (1000)", metric="errors.discrete.eps_theta.at_last_n.mean",
                        interval=ci("errors.discrete.eps_theta.at_last_n")))


PAPER = Paper(
    slug="rethink_uncertainty",
    title="Rethinking Aleatoric and Epistemic Uncertainty",
    method="decision-theoretic uncertainty framework (Bickford Smith, Kossen, Trollope, van der Wilk, Foster, Rainforth)",
    paper_class="A",
    source="abstracts-003.txt #17",
    official_code="fbickfordsmith/rethinking-aleatoric-epistemic (GitHub)",
    claims=(
        _ratio_claim("discrete", "eps_z"), _ratio_claim("discrete", "eps_theta"),
        _ratio_claim("continuous", "eps_z"), _ratio_claim("continuous", "eps_theta"),
        _monotone_claim("discrete"), _monotone_claim("continuous"),
        _bald_claim(1), _bald_claim(10),
        Claim(id="bald_beats_random",
              text=("information-theoretic quantities can still be useful in guiding data acquisition: digits test "
                    "accuracy after the last acquisition round (200 acquired labels), BALD minus random > 0 "
                    "(paired over seeds)"),
              source="abstract; plan claim 3 (direction, supplementary)",
              metric="active_learning.final_acc_diff.bald_minus_random.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim",
              interval=ci("active_learning.final_acc_diff.bald_minus_random"),
              control=Control(name="random acquisition from an independent stream minus random",
                              metric="active_learning.final_acc_diff.random_control_minus_random.mean",
                              interval=ci("active_learning.final_acc_diff.random_control_minus_random"))),
        Claim(id="decomposition_identities",
              text=("the decision-theoretic decomposition sums to the total (squared loss: h[p_n] = E_theta h[p(z|theta)] "
                    "+ Var_theta) and BALD equals the model's own parameter EIG (log loss), each side computed by a "
                    "separate route: max abs error over all seeds, n and both problems < 1e-6"),
              source="paper's decomposition (implementation check)", metric="identities.max_abs_error",
              comparison="<", threshold=1e-6, kind="exact", role="sanity"),
    ),
    limitations=(
        "The two conjugate problems are the paper's own demos at the paper's scale (50 seeds, n up to 1000): "
        "they show the estimation errors of the information-theoretic quantities exactly, but only for a "
        "well-specified Beta-Bernoulli model with a prior centred on the truth and a Normal-Gamma model with a "
        "misspecified prior mean and precision. The paper's conceptual contribution (identifying incoherence in "
        "the literature, the decision-theoretic taxonomy) is not a computation and is not checked here. The "
        "active-learning check is our extension (the paper explains, rather than benchmarks, why BALD helps "
        "data acquisition): a 5-member deep ensemble of small MLPs on the 1,797-image sklearn digits set, "
        "5 seeds, 20 rounds of 10 labels, so its CI over seeds is wide and the result says nothing about "
        "large-scale image benchmarks."
    ),
)
