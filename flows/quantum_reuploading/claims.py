"""The claims of deep data re-uploading, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

PAPER = Paper(
    slug="quantum_reuploading",
    title="Predictive Performance of Deep Quantum Data Re-uploading Models",
    method="data re-uploading PQC analysis (deep-narrow vs wide circuits; D_2 bound of the mean encoded state)",
    paper_class="A",
    source="abstracts-000.txt #18",
    official_code="SheffieldWang/deep-quantum-data-reuploading (GitHub; PennyLane + JAX/Flax)",
    claims=(
        Claim(id="deep_narrow_degrades",
              text="when processing high-dimensional data with limited-qubit data re-uploading models, their "
                   "predictive performance progressively degenerates ... as the number of encoding layers "
                   "increases: Spearman(L, test accuracy) <= -0.8 for N = 2 qubits (synthetic data)",
              source="abstract; plan claim 1", metric="synthetic.deep_narrow.spearman_L_test_acc",
              comparison="<=", threshold=-0.8, kind="direction", role="claim",
              per_seed="synthetic.deep_narrow.spearman_per_seed",
              control=Control(name="same circuits trained on permuted labels",
                              metric="synthetic_permuted.deep_narrow.spearman_L_test_acc")),
        Claim(id="deep_narrow_near_random",
              text="... degenerates to near random-guessing levels: test accuracy at the largest L <= 0.6",
              source="abstract; plan claim 1", metric="synthetic.deep_narrow.largest_L_test_acc.mean",
              comparison="<=", threshold=0.6, kind="magnitude", role="claim",
              interval=ci("synthetic.deep_narrow.largest_L_test_acc"),
              control=Control(name="the same N = 2 family at the smallest L (L = 1)",
                              metric="synthetic.deep_narrow.smallest_L_test_acc.mean",
                              interval=ci("synthetic.deep_narrow.smallest_L_test_acc"))),
        Claim(id="shallow_accurate",
              text="(setup check, the plan's control for claim 1, not a claim of the paper) with few encoding "
                   "layers (L <= 2) the same circuits predict well: test accuracy >= 0.8 at every L <= 2",
              source="plan claim 1", metric="synthetic.deep_narrow.shallow_min_test_acc.mean",
              comparison=">=", threshold=0.8, kind="magnitude", role="sanity",
              interval=ci("synthetic.deep_narrow.shallow_min_test_acc")),
        Claim(id="wider_beats_deeper",
              text="quantum data re-uploading models should be designed with wider circuit architectures rather "
                   "than deeper and narrower ones: at D = 24, test acc(N = 8, L = 1) - test acc(N = 2, L = 4) "
                   ">= 10 pp",
              source="abstract; plan claim 2", metric="synthetic.wide_minus_deep.mean",
              comparison=">=", threshold=0.10, kind="magnitude", role="claim",
              interval=ci("synthetic.wide_minus_deep"),
              control=Control(name="both circuits trained on permuted labels",
                              metric="synthetic_permuted.wide_minus_deep.mean",
                              interval=ci("synthetic_permuted.wide_minus_deep"))),
        Claim(id="repetition_no_rescue",
              text="the repeated data uploading cannot mitigate the performance degradation: at the largest L, "
                   "test acc(R = 3) - test acc(R = 1) <= 5 pp",
              source="abstract; plan claim 3", metric="synthetic.repetition_gain_largest_L.mean",
              comparison="<=", threshold=0.05, kind="direction", role="claim",
              interval=ci("synthetic.repetition_gain_largest_L"),
              control=Control(name="a remedy the paper says works: widening (N = 8, L = 1 minus N = 2, L = 4 at D = 24)",
                              metric="synthetic.wide_minus_deep.mean",
                              interval=ci("synthetic.wide_minus_deep"))),
        Claim(id="d2_empirical_within_bound",
              text="D_2(E_x[rho(x)] || rho_I) <= log2(1 + (2^N - 1) e^{-L sigma^2}) measured on the data: the "
                   "empirical D_2 (its lower 3-SE confidence bound) minus the bound, maximised over every "
                   "R = 1 circuit, seed and stage (random init, trained), is <= 0",
              source="paper's Theorem (bound quoted in the plan); plan claim 3",
              metric="d2.empirical.max_excess_lcb", comparison="<=", threshold=0.0, kind="exact", role="claim",
              per_seed="d2.empirical.max_excess_lcb_per_seed",
              control_reason="an upper bound on the mean encoded state: no circuit or input distribution the "
                             "theorem covers can exceed it, so the only 'failing' case is one outside the theorem "
                             "(a single encoded pure state has D_2 = N bits), which fails by construction and "
                             "adds no power; the check's weakness (a bound below the estimate's noise at large "
                             "L) is reported in the notes instead",
              scaled="sigma^2 = mean per-feature variance of the diagnostic sample; the margin filter of the "
                     "official data makes features dependent, which the theorem does not cover"),
        Claim(id="d2_exact_iid_within_bound",
              text="the same bound for the exact mean state under i.i.d. U(-pi/2, pi/2) angles "
                   "(sigma^2 = pi^2/12, the theorem's assumptions), every R = 1 circuit and stage",
              source="paper's Theorem (bound quoted in the plan)", metric="d2.exact_iid.max_excess",
              comparison="<=", threshold=1e-9, kind="exact", role="sanity"),
    ),
    limitations=(
        "Exact statevector simulation with N <= 8 qubits, 300 training points, 150 full-batch Adam steps and "
        "3 seeds; the paper trains 1,000 epochs on 600 points with 10 repeats and tests on 10,000 points, and "
        "its real-data experiments (MNIST 0/1 and CIFAR-10 at 12x12 pixels, 8 qubits, up to 18 layers and 8 "
        "repetitions) are replaced by scikit-learn digits 3-vs-8 reduced by PCA (about 180 training images). "
        "The official synthetic generator's margin 0.3 D cannot be sampled beyond D of about 50, so the margin "
        "is fixed at its D = 24 value in units of std(w.x) for every D; the paper's own synthetic sweep stops "
        "at D = 24 (one qubit, L = 1..8), while this run sweeps D = 6..192 with two qubits as the plan asks. "
        "No noise, no shots: expectation values are exact."
    ),
)
