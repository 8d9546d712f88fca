"""The claims of P2P, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

AT = "at one fixed kept fraction (r_eval of the pixels) on clean test images"
RANDOM = "random superpixels (P2P's groups and predictor, random scores) in P2P's place"

PAPER = Paper(
    slug="p2p",
    title="From Pixels to Perception: Interpretable Predictions via Instance-wise Grouped Feature Selection",
    method="P2P: selector CNN -> per-superpixel scores -> relaxed top-r mask -> predictor on the masked image; "
           "per-instance sparsity by a confidence threshold",
    paper_class="B",
    source="abstracts-003.txt #1",
    official_code=None,
    claims=(
        Claim(id="grouped_localizes_better_than_pixel",
              text=("To align the sparsification with human perception, we learn the masking in the space of "
                    "semantically meaningful pixel regions rather than on pixel-level -- localization precision "
                    "(share of kept pixels on the digit) of P2P minus that of the identical model with 1-pixel "
                    f"groups >= 0.10, {AT}"),
              source="abstract; plan claim 1 (magnitude)", metric="loc.p2p_minus_pixel.mean", comparison=">=",
              threshold=0.10, kind="magnitude", role="claim", interval=ci("loc.p2p_minus_pixel"),
              control=Control(name=f"{RANDOM}, minus pixel-level", metric="loc.random_sp_minus_pixel.mean",
                              interval=ci("loc.random_sp_minus_pixel"))),
        Claim(id="grouped_accuracy_matches_pixel",
              text=("the plan's matched-accuracy condition of claim 1: test accuracy of P2P minus that of the "
                    f"pixel-level model > -0.02 (not more than 2 points worse), {AT}"),
              source="plan claim 1 (|delta acc| <= 2 pts), one-sided", metric="acc.p2p_minus_pixel.mean",
              comparison=">", threshold=-0.02, kind="magnitude", role="claim", interval=ci("acc.p2p_minus_pixel"),
              control=Control(name=f"{RANDOM}, minus pixel-level", metric="acc.random_sp_minus_pixel.mean",
                              interval=ci("acc.random_sp_minus_pixel"))),
        Claim(id="p2p_localizes_better_than_saliency",
              text=("our inherently interpretable classifier produces more meaningful, human-understandable "
                    "predictions than state-of-the-art benchmarks -- localization precision of P2P minus that of a "
                    f"black-box CNN's gradient x input saliency thresholded to the same kept fraction > 0, {AT}"),
              source="abstract; plan baseline (c) (direction)", metric="loc.p2p_minus_saliency.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci("loc.p2p_minus_saliency"),
              control=Control(name=f"{RANDOM}, minus saliency", metric="loc.random_sp_minus_saliency.mean",
                              interval=ci("loc.random_sp_minus_saliency"))),
        Claim(id="p2p_localizes_better_than_global_mask",
              text=("instance-wise beats global selection: localization precision of P2P minus that of a global "
                    f"(non-instance, LASSO-like) learned mask > 0, {AT}. A sanity check, not a claim: the digits are "
                    "placed at random, so a global mask can only learn a centre prior and any working instance-wise "
                    "selector beats it by the data's construction"),
              source="plan baseline (d); ours (sanity)", metric="loc.p2p_minus_global.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity", interval=ci("loc.p2p_minus_global")),
        Claim(id="dynamic_sparsity_keeps_less",
              text=("we introduce an explicit way to dynamically determine the required level of sparsity for each "
                    "instance -- mean kept fraction of P2P's per-instance confidence rule / that of the same model at "
                    "one global kept fraction matched to exactly its accuracy (interpolated) < 1"),
              source="abstract; plan claim 2 (direction)", metric="dyn.kept_ratio.ratio", comparison="<",
              threshold=1.0, kind="direction", role="claim", interval=ci("dyn.kept_ratio"),
              control=Control(name="the per-instance levels permuted across test images (same budgets, "
                                   "not instance-matched), against the global level matched to their accuracy",
                              metric="dyn.permuted_kept_ratio.ratio", interval=ci("dyn.permuted_kept_ratio"))),
        Claim(id="p2p_avoids_spurious_cue",
              text=("On the confounded variant (a class-coded square in training only), the P2P share of kept pixels "
                    "on the spurious square minus the post-hoc-saliency baseline's share < 0"),
              source="plan claim 3 (direction)", metric="conf.spur_p2p_minus_saliency.mean", comparison="<",
              threshold=0.0, kind="direction", role="claim", interval=ci("conf.spur_p2p_minus_saliency"),
              control=Control(name="the global learned mask (can only pick fixed positions, e.g. the confounder's) "
                                   "minus saliency", metric="conf.spur_global_minus_saliency.mean",
                              interval=ci("conf.spur_global_minus_saliency"))),
        Claim(id="task_learnable", text="the black-box CNN's clean test accuracy > 0.8 (the scaled task is learnable)",
              source="ours (sanity)", metric="acc.blackbox.mean", comparison=">", threshold=0.8, kind="magnitude",
              role="sanity", interval=ci("acc.blackbox")),
        Claim(id="superpixels_follow_the_object",
              text=("SLIC superpixel purity w.r.t. the digit mask (share of pixels in the majority class of their "
                     "superpixel) > 0.9 on the clean test images: the groups can separate object from clutter"),
              source="ours (sanity, holds by the data's construction)", metric="data.superpixel_purity.mean",
              comparison=">", threshold=0.9, kind="magnitude", role="sanity", interval=ci("data.superpixel_purity")),
    ),
    limitations=(
        "Semi-synthetic only: 8x8 scikit-learn digits up-sampled 2x on a 32x32 clutter canvas stand in for the paper's "
        "semi-synthetic and natural-image data sets (no COCO-like or ImageNet data, no pretrained backbones); "
        "'meaningful to humans' is operationalized only as overlap with the known digit mask, with no user study. "
        "Small CNNs trained for a few epochs reach far below the accuracy of the paper's models, so absolute numbers "
        "are not comparable. The paper's exact mask relaxation and dynamic-sparsity mechanism could not be read "
        "(only the abstract and introduction were retrievable): the per-instance random kept fraction in training "
        "and the confidence-threshold stop at test time follow the plan's working design [ours], as do the "
        "baselines (no InfoMask, no L2X/INVASE/REAL-X re-implementations beyond the pixel-level variant). Each seed "
        "draws its own data set (and superpixels) and its own training randomness."
    ),
)
