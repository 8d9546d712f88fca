"""The claims of BRONet, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

LABEL = {"bro_la": "BRO + LA (BRONet)", "bro_ce": "BRO + CE", "bro_xent": "BRO + offset-CE", "cayley_ce": "Cayley + CE",
         "soc_ce": "SOC + CE", "cayley_la": "Cayley + LA", "cayley_ce_twin": "Cayley + CE (A/A twin)",
         "bro_ce_twin": "BRO + CE (A/A twin)"}
# (claim id, method, baseline, radius, A/A control config, text)
COMPARISONS = (
    ("bronet_beats_cayley_36", "bro_la", "cayley_ce", 36, "cayley_ce",
     "By employing our BRO layer and loss function, we design BRONet ... that achieves state-of-the-art certified "
     "robustness: certified accuracy of BRO + LA minus Cayley + CE at l2 radius 36/255 > 0 (paired over seeds)"),
    ("bronet_beats_soc_36", "bro_la", "soc_ce", 36, "cayley_ce",
     "BRONet achieves state-of-the-art certified robustness: certified accuracy of BRO + LA minus SOC + CE at "
     "l2 radius 36/255 > 0 (paired over seeds)"),
    ("la_beats_ce_bro_108", "bro_la", "bro_ce", 108, "bro_ce",
     "we introduce a new loss function that employs an annealing mechanism to increase margin for most data "
     "points. This enables Lipschitz models to provide better certified robustness: with the BRO backbone, "
     "certified accuracy of LA minus CE at l2 radius 108/255 > 0 (paired over seeds)"),
    ("bro_beats_cayley_ce_36", "bro_ce", "cayley_ce", 36, "bro_ce",
     "a novel, efficient Block Reflector Orthogonal (BRO) layer that enhances the capability of orthogonal layers "
     "on constructing more expressive Lipschitz neural architectures: with the same CE loss, certified accuracy "
     "of BRO minus Cayley at l2 radius 36/255 > 0 (paired over seeds)"),
)
AA = "the same configuration trained twice (another initialisation and batch order, same split): {} twin minus {}"


def _comparison_claim(cid: str, new: str, base: str, r: int, aa: str, text: str) -> Claim:
    metric = f"compare.{new}_vs_{base}.r{r}"
    control = f"control.aa_{aa}.r{r}"
    return Claim(id=cid, text=text, source="abstract; plan claim checks 2-3 (direction)", metric=f"{metric}.mean",
                 comparison=">", threshold=0.0, kind="direction", role="claim", interval=ci(metric),
                 # an A/A difference measures what init and batch order alone give the same statistic
                 control=Control(name=AA.format(LABEL[aa], LABEL[aa]), metric=f"{control}.mean", interval=ci(control)))


PAPER = Paper(
    slug="bronet_lipschitz",
    title="Enhancing Certified Robustness via Block Reflector Orthogonal Layers and Logit Annealing Loss",
    method="BRONet: BRO (block reflector orthogonal) convolutions + LA (logit annealing) loss, Lipschitz-margin certificate",
    paper_class="B",
    source="abstracts-004.txt #19",
    official_code="ntuaislab/BRONet (lipconvnet/: BRO, Cayley, SOC layers, LA / Xent losses, trainer defaults; read)",
    claims=(
        *(_comparison_claim(*c) for c in COMPARISONS),
        Claim(id="bro_faster_than_soc",
              text=("a novel, efficient Block Reflector Orthogonal (BRO) layer: mean time per training step of the "
                    "BRO network / the same network with SOC layers < 1 (forward, backward, SGD step, one CPU thread; "
                    "thread CPU time, the layers interleaved step by step in one process, repeated)"),
              source="abstract (efficient); plan claim check 3", metric="timings.step.bro_over_soc.ratio",
              comparison="<", threshold=1.0, kind="direction", role="claim",
              interval=ci("timings.step.bro_over_soc"),
              control=Control(name="SOC timed twice in the same repeats (A/A): second / first",
                              metric="timings.step.soc_twin_over_soc.ratio",
                              interval=ci("timings.step.soc_twin_over_soc"))),
        Claim(id="bro_core_orthogonal",
              text=("BRO is orthogonal by construction: max over seeds and BRO layers of the trained BRONet of "
                    "| ||f(x) - f(x')|| / ||x - x'|| - 1 | for the layer's full circular operator (float64, 16 random "
                    "pairs per layer, eps regulariser as trained) <= 1e-4"),
              source="plan claim check 1 (exact)", metric="sanity.bro_core_error_max", comparison="<=",
              threshold=1e-4, kind="exact", role="sanity"),
        Claim(id="certificate_sound",
              text=("soundness: test points certified at a radius (margin / (sqrt(2) L) > r) but misclassified by "
                    "PGD-l2 within r, summed over configurations, seeds and radii = 0"),
              source="plan claim check 1 (exact)", metric="sanity.violations_total", comparison="<=",
              threshold=0.0, kind="exact", role="sanity"),
        Claim(id="certified_below_pgd",
              text="certified accuracy <= PGD-l2 robust accuracy at every radius: max over runs of the difference <= 0",
              source="plan claim check 1 (exact)", metric="sanity.max_cert_minus_pgd", comparison="<=",
              threshold=0.0, kind="exact", role="sanity"),
        Claim(id="fft_layers_lipschitz_one",
              text=("BRO and Cayley networks are 1-Lipschitz by construction: max over their runs of the product of "
                    "the layers' power-iteration spectral norms <= 1 + 1e-4"),
              source="plan (lipschitz() = 1 in the official layers)", metric="sanity.max_bound_bro_cayley",
              comparison="<=", threshold=1.0 + 1e-4, kind="exact", role="sanity"),
    ),
    limitations=(
        "8x8 digits (1,437 training images) and a LipConvNet of three stages with 8/16/32 channels trained 10 "
        "epochs stand in for CIFAR/Tiny-ImageNet/ImageNet and the paper's deep LipConvNets/BRONets trained for 200 "
        "epochs; absolute certified accuracies are not comparable, and 'state of the art' can only be read as "
        "'above these two baselines at this scale'. No LOT or SLL baseline, no diffusion-generated data, no "
        "dense-layer BRONet backbone, no CR/EMMA loss. Timings are CPU time (one thread) on a shared machine, not the "
        "paper's GPU, where FFTs and small solves cost differently. The LA hyper-parameters are the official "
        "CIFAR-100 defaults, not tuned for digits; the same holds for the SGD schedule."
    ),
)
