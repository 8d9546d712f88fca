"""The claims of the CK/NTK spikes paper, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

_FRACTION = ("the metric is itself a frequency over the seeds (worst cell of the fraction of seeds with the "
             "count): the seeds are its sample, and each seed's 0/1 indicator is what the fraction counts")


def _naive(claim: str, field: str) -> Control:
    """The position and alignment claims' control: the measured values against the naive limit (no
    random-matrix corrections, method.population_outlier; zeta = 1), same worst cell rule and tolerance."""
    return Control(name="naive limit without random-matrix corrections (population kernels, n/p = n/d = 0)",
                   metric=f"claims.{claim}_control.{field}",
                   interval=ci(f"claims.{claim}_control"))


_NULL = "snr = 0 (no class signal), same network, same rule"
_LIMIT = (" Compared with OUR derived limit (Gaussian-equivalent layers as in Fan & Wang 2020 + spiked-model algebra): "
          "the paper's own outlier equations could not be read, so this is a consistency check of the random-matrix "
          "picture, not of the paper's printed formulas.")


PAPER = Paper(
    slug="ck_ntk_spikes",
    title="Eigen Analysis of Conjugate Kernel and Neural Tangent Kernel",
    method="Isolated eigenvalues (spikes) of the CK and NTK of deep random networks on Gaussian-mixture inputs",
    paper_class="B",
    source="abstracts-003.txt #6",
    official_code=None,
    claims=(
        Claim(id="ck_outliers_at_top_snr",
              text="certain eigenvalues of the conjugate kernel ... may lie outside the support of their limiting "
                   "spectral measures (plan: at the top SNR, #CK eigenvalues beyond the null edge = planted spike "
                   "rank in >= 90% of seeds, at every layer)",
              source="abstract; plan claim 1", metric="claims.count_top_ck.min", comparison=">=",
              threshold=0.9, kind="exact", role="claim", no_interval_reason=_FRACTION,
              control=Control(name=_NULL, metric="claims.count_top_ck_control.min")),
        Claim(id="ntk_outliers_at_top_snr",
              text="certain eigenvalues of the ... neural tangent kernel may lie outside the support of their "
                   "limiting spectral measures (same count check for the NTK)",
              source="abstract; plan claim 1 applied to the NTK", metric="claims.count_top_ntk.min",
              comparison=">=", threshold=0.9, kind="exact", role="claim", no_interval_reason=_FRACTION,
              control=Control(name=_NULL, metric="claims.count_top_ntk_control.min")),
        Claim(id="no_outliers_without_signal",
              text="phase transition: at SNR = 0 there are 0 outliers in >= 90% of seeds (every CK layer and the NTK)",
              source="plan claim 1", metric="claims.zero_snr.min", comparison=">=", threshold=0.9, kind="exact",
              role="claim", no_interval_reason=_FRACTION,
              control=Control(name="top snr (planted spikes), same network, same rule",
                              metric="claims.zero_snr_control.min")),
        Claim(id="eigenspace_clusters_classes",
              text="the eigenspace captures inherent group features (plan: k-means on the outlier eigenvectors "
                   "reaches ARI >= 0.9 at the top SNR; worst activation x kernel)",
              source="abstract; plan claim 2", metric="claims.ari_top.min", comparison=">=", threshold=0.9,
              kind="magnitude", role="claim", interval=ci("claims.ari_top"),
              control=Control(name=_NULL, metric="claims.ari_top_control.min",
                              interval=ci("claims.ari_top_control"))),
        Claim(id="projection_block_constant",
              text="entrywise limit of the projection matrix ... captures group features (plan: |P - P_block|_F / "
                   "|P|_F <= 0.25 at the top SNR; worst activation x kernel)",
              source="abstract; plan claim 2", metric="claims.block_fit_top.max", comparison="<=",
              threshold=0.25, kind="magnitude",
              role="claim", interval=ci("claims.block_fit_top"),
              control=Control(name=_NULL, metric="claims.block_fit_top_control.max",
                              interval=ci("claims.block_fit_top_control"))),
        Claim(id="ck_outlier_positions",
              text="the existence and asymptotic positions of such isolated eigenvalues (plan: |lambda_emp - "
                   "lambda_pred| / lambda_pred <= 0.05 at every CK layer, top SNR)" + _LIMIT,
              source="abstract; plan claim 3", metric="claims.ck_position.max_rel_err", comparison="<=",
              threshold=0.05, kind="magnitude",
              role="claim", interval=ci("claims.ck_position"),
              control=_naive("ck_position", "max_rel_err")),
        Claim(id="ntk_outlier_positions",
              text="the existence and asymptotic positions of such isolated eigenvalues (the NTK, same tolerance)" + _LIMIT,
              source="abstract; plan claim 3 applied to the NTK", metric="claims.ntk_position.max_rel_err",
              comparison="<=", threshold=0.05, kind="magnitude",
              role="claim", interval=ci("claims.ntk_position"),
              control=_naive("ntk_position", "max_rel_err")),
        Claim(id="projection_entrywise_limit",
              text="a precise characterization of the entrywise limit of the projection matrix onto the eigenspace "
                   "(ours: the limit P -> zeta Pi_classes; |zeta_emp - zeta_pred| <= 0.05 at the top SNR, every "
                   "CK layer and the NTK)" + _LIMIT,
              source="abstract; threshold ours (fixed before any run)", metric="claims.zeta.max_abs_err",
              comparison="<=", threshold=0.05, kind="magnitude",
              role="claim", interval=ci("claims.zeta"),
              control=_naive("zeta", "max_abs_err")),
    ),
    limitations=(
        "n = 1,200 samples, p = 600, width 1,000 and depth 3 instead of the high-dimensional limit: outliers "
        "fluctuate by about sqrt(2/width) = 4.5% per layer and the bulk edge by 1-2%, so positions are compared "
        "through seed means and the outlier count depends on the null-edge rule. The comparison values come "
        "from a limit we derived (Gaussian equivalence + spiked-model algebra), not from the paper's theorems, "
        "which we could not read; it captures the first-order (linear) part of each activation, so effects of "
        "the even part of ReLU that vanish as n grows (e.g. squared within-class correlations) are not in it. "
        "The synthetic classes differ by their means only (the covariance-driven spikes of the paper's "
        "mean-subtracted MNIST appear only in the ungated digits experiment, 8x8 digits instead of MNIST)."
    ),
)
