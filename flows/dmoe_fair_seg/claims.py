"""The claims of dMoE, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

SCALED = ("synthetic 32x32 lesion images (3 groups, training prevalence 80/15/5 %, 1,000 training images, balanced "
          "test set) and a 3-stage TinyUNet (8-16-32 channels, the plan's 16-32-64 halved, and 5 epochs instead of the "
          "plan's 10, both for the ~2 min CPU budget) instead of Harvard-FairSeg / HAM10000 / the 3-D in-house data "
          "with TransUNet / ContextUNETR; the plan's thresholds, fixed before the run")
SHUFFLED = "dMoE trained and tested with a shuffled attribute (same capacity and group frequencies, no distribution signal)"

PAPER = Paper(
    slug="dmoe_fair_seg",
    title="Distribution-aware Fairness Learning in Medical Image Segmentation From a Control-Theoretic Perspective",
    method="dMoE: Distribution-aware Mixture of Experts (noisy top-k routers, one per attribute group, shared experts)",
    paper_class="B",
    source="abstracts-000.txt #5",
    official_code="tvseg/dMoE (GitHub; 3d/dmoeunet.py and 2d/networks/vit_seg_modeling.py read, re-written)",
    claims=(
        Claim(id="es_dice_dmoe_over_unet",
              text=("dMoE achieves state-of-the-art (equity-scaled) performance ... mitigating biases from imbalanced "
                    "distributions: ES-Dice(dMoE) - ES-Dice(UNet) > 0 (paired over seeds)"),
              source="abstract; plan claim 1 (direction)", metric="diff.es.dmoe_vs_unet.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", requires=("unet_learns_the_task",), interval=ci("diff.es.dmoe_vs_unet"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - UNet", metric="diff.es.dmoe_shuffled_vs_unet.mean",
                              interval=ci("diff.es.dmoe_shuffled_vs_unet"))),
        Claim(id="es_dice_dmoe_over_moe",
              text=("dMoE adapts to heterogeneous distributions by incorporating demographic and clinical factors: "
                    "ES-Dice(dMoE) - ES-Dice(standard MoE, one router) > 0 (paired over seeds)"),
              source="abstract; plan claim 1 (direction)", metric="diff.es.dmoe_vs_moe.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("diff.es.dmoe_vs_moe"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - MoE", metric="diff.es.dmoe_shuffled_vs_moe.mean",
                              interval=ci("diff.es.dmoe_shuffled_vs_moe"))),
        Claim(id="minority_dice_gain_2pp",
              text=("dMoE is effective in mitigating biases from imbalanced distributions: Dice of the minority group "
                    "(5 % of training images) with dMoE - with the UNet >= 0.02 (2 pp)"),
              source="abstract; plan claim 2 (magnitude)", metric="diff.minority.dmoe_vs_unet.mean", comparison=">=",
              threshold=0.02, kind="magnitude", role="claim", requires=("unet_learns_the_task",), interval=ci("diff.minority.dmoe_vs_unet"), scaled=SCALED,
              control=Control(name=f"{SHUFFLED} - UNet", metric="diff.minority.dmoe_shuffled_vs_unet.mean",
                              interval=ci("diff.minority.dmoe_shuffled_vs_unet"))),
        Claim(id="no_overall_dice_sacrifice",
              text=("fairness without an accuracy cost (state-of-the-art Dice as well as ES-Dice): overall Dice(dMoE) - "
                    "overall Dice(UNet) >= -0.01 (1 pp)"),
              source="abstract; plan claim 3 (magnitude, non-inferiority)", metric="diff.overall.dmoe_vs_unet.mean",
              comparison=">=", threshold=-0.01, kind="magnitude", role="claim", requires=("unet_learns_the_task",),
              interval=ci("diff.overall.dmoe_vs_unet"), scaled=SCALED,
              # the trained dMoE fed a wrong attribute at test time: if routing matters, this must lose accuracy
              control=Control(name="dMoE with every test image routed to group (g + 1) mod 3 - UNet",
                              metric="diff.overall.dmoe_misrouted_vs_unet.mean",
                              interval=ci("diff.overall.dmoe_misrouted_vs_unet"))),
        Claim(id="unet_learns_the_task",
              text="the plain TinyUNet segments the synthetic lesions: overall test Dice > 0.5",
              source="own check of the setup", metric="dice.unet.overall.mean", comparison=">", threshold=0.5,
              kind="magnitude", role="sanity", interval=ci("dice.unet.overall")),
        Claim(id="baseline_is_biased",
              text=("the setup has a bias to mitigate: the UNet's Dice on the majority group (80 % of training "
                    "images) minus its Dice on the minority group (5 %) > 0"),
              source="own check of the setup (the premise of the paper's claims)", metric="sanity.unet_bias.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity", interval=ci("sanity.unet_bias")),
    ),
    limitations=(
        "Synthetic 2-D lesion images, where the attribute changes image formation by construction (contrast "
        "polarity, blur, background frequency, lesion size): the run can show whether per-group routing helps a "
        "small UNet on an imbalanced, attribute-dependent distribution, not whether it helps on Harvard-FairSeg, "
        "HAM10000 or clinical 3-D data, nor anything about the paper's control-theoretic analysis or its "
        "Transformer (TransUNet) integration. The TinyUNet (3 stages) stands in for ContextUNETR (5 stages) and "
        "the training is a few CPU epochs. The router noise is used in training only (the official code also "
        "adds it at inference); the experts' dropout is re-implemented on a per-layer generator for determinism."
    ),
)
