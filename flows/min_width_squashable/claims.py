"""The claims of the minimum-width paper, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper

# Fixed from the plan before any run (never tuned on results; the plan's activations are in params.py):
SUFFICIENT_FRACTION = 0.25              # "width w* reaches <= 0.25 x the width-(w* - 1) lower bound"
PLAN_MIN_DEPTH = 8                      # the plan's depths 8-16: the claims use the best net of depth >= 8
BOUND_SLACK = 0.99                      # "within 1 % numerical slack"
CONSTRUCTION_TOL = 1e-2                 # ours: the explicit identity/step approximants reach L^2 error < 1e-2
CONTROL = "relu"
EXISTENTIAL = (
    "The claim is existential (some trained network reaches the error the theorem says exists): its statistic is "
    "the best over restarts and depths, a minimum over optimisation attempts rather than a mean of samples, so "
    "neither a confidence interval over restarts nor every restart agreeing is what it claims. Per-restart values are in the metrics.")

PAPER = Paper(
    slug="min_width_squashable",
    title="Minimum Width for Universal Approximation using Squashable Activation Functions",
    method="Squashable activations: minimum width max{d_x, d_y, 2} for L^p universal approximation",
    paper_class="B",
    source="abstracts-000.txt #17",
    official_code=None,
    claims=(
        Claim(id="width_wstar_suffices",
              text="for networks using a squashable activation function to universally approximate L^p "
                   "functions from [0,1]^{d_x} to R^{d_y}, the minimum width is max{d_x,d_y,2}: with tanh "
                   "and sigmoid, the best trained width-w* network (depth >= 8, 5 restarts) reaches an L^2 "
                   "error <= 0.25 x the exact width-(w*-1) lower bound on every target (a) 1->1, (b) 2->1, "
                   "(c) 1->2 (metric: the worst of the six ratios)",
              source="abstract; plan claim 1", metric="width.plan_ratio_max", comparison="<=",
              threshold=SUFFICIENT_FRACTION, kind="magnitude", role="claim",
              no_interval_reason=EXISTENTIAL,
              # ReLU is not squashable: at width w* it should miss on (b), where its own minimum width is 3
              control=Control(name="ReLU (not squashable) at width w*, worst target",
                              metric="control.relu_ratio_wstar_max")),
        Claim(id="lower_bounds_hold",
              text="width w*-1 is not enough: every trained width-(w*-1) network (monotone activations, "
                   "every depth and restart) stays above the computed lower bound, within 1 % slack "
                   "(metric: min over nets of error / bound)",
              source="plan claim 2 (sanity: validates the bounds)", metric="bounds.min_ratio_below_wstar",
              comparison=">=", threshold=BOUND_SLACK, kind="exact", role="sanity"),
        Claim(id="nonmonotone_width1_exception",
              text="the same bound holds for d_x=d_y=1 if the activation function is monotone: a width-1 "
                   "network with the non-monotone sin beats the best error any monotone width-1 network "
                   "can reach on target (a) (metric: best sin error / monotone bound)",
              source="abstract; plan claim 3", metric="exception.ratio", comparison="<", threshold=1.0,
              kind="direction", role="claim", no_interval_reason=EXISTENTIAL,
              # the same width-1 nets with a monotone activation (it cannot pass: the bound holds for them)
              control=Control(name="width-1 nets with a monotone activation (best of those trained) on (a)",
                              metric="control.monotone_width1_ratio_a")),
        Claim(id="empirical_width_matches_formula",
              text="the minimum width is max{d_x,d_y,2} for every squashable activation trained here "
                   "(tanh, sigmoid, softplus, leaky ReLU by default): number of (target, activation) pairs whose empirical "
                   "minimum width (smallest trained width reaching 0.25 x the width-(w*-1) bound) differs "
                   "from the formula",
              source="abstract (closed-form width); ours: the comparison over all trained squashable "
                     "activations", metric="width.mismatches", comparison="<=", threshold=0.0, kind="magnitude",
              role="claim", no_interval_reason=EXISTENTIAL,
              control=Control(name="ReLU (not squashable) against the squashable formula max{d_x,d_y,2}",
                              metric="control.relu_mismatches_vs_squashable_formula")),
        Claim(id="relu_control_needs_more_width",
              text="control: ReLU is not squashable and its L^p minimum width is max{d_x+1,d_y} (Park et "
                   "al. 2021), 3 on target (b): at width max{d_x,d_y,2}=2 it does not reach 0.25 x the "
                   "width-1 bound (metric: best ReLU width-2 error / bound on (b))",
              source="paper's introduction (prior ReLU result); ours as a control", metric="control.relu_ratio_b_wstar",
              comparison=">", threshold=SUFFICIENT_FRACTION, kind="direction", role="claim",
              per_seed="control.relu_ratio_b_wstar_per_seed",
              # if a squashable activation also misses at width 2 on (b), ReLU missing there says nothing
              control=Control(name="the best squashable plan activation (tanh, sigmoid) at width w* on (b)",
                              metric="control.squashable_ratio_b_wstar")),
        Claim(id="squashability_test_matches_paper",
              text="all non-affine analytic functions and a class of piecewise functions are squashable: "
                   "the numerical test accepts sigmoid, tanh, softplus, GELU, sin, exp, x^2, leaky ReLU, "
                   "hardswish, ELU and rejects ReLU, ReLU6, hard tanh, identity, affine and the step "
                   "(metric: misclassified activations)",
              source="abstract; Lemmas 4-5 as quoted in the paper's introduction", metric="squash.misclassified",
              comparison="<=", threshold=0.0, kind="exact", role="sanity"),
        Claim(id="constructions_converge",
              text="squashable functions can approximate the identity function and binary step function by "
                   "alternatively composing with affine transformations: for every accepted activation the "
                   "explicit identity (smallest scale) and step (most compositions) approximants reach an "
                   "L^2([-1,1]) error < 1e-2 (metric: the worst of them)",
              source="abstract (definition); threshold ours", metric="squash.max_final_error",
              comparison="<", threshold=CONSTRUCTION_TOL, kind="exact", role="sanity"),
    ),
    limitations=(
        "An empirical illustration of an existence theorem, not a proof: trained networks of depth at most "
        "8 (by default) on ~200-point training grids can only show that width w* = max{d_x, d_y, 2} *can* get far below "
        "what width w* - 1 can ever reach (the exact lower bounds are computed, not trained), and a failure to "
        "reach the threshold may be the optimiser's, not the theorem's. Target (b) is the hardest: with width "
        "d_x = 2 and strictly monotone activations every layer is injective, so the level sets of a bump can "
        "only be approximated in L^p, by networks whose failure of injectivity is confined to sets of small "
        "measure (our reasoning, not the paper's text), which gradient descent does not find easily. "
        "Only L^2 on midpoint grids (the theorem covers every p in "
        "[1, inf)), three low-dimensional targets, and a numerical squashability test of a sufficient "
        "condition on [-8, 8] (not a proof of squashability) are run."
    ),
)
