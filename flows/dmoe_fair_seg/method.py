"""dMoE: Distribution-aware Mixture of Experts for fair medical image segmentation (ICML 2025),
in plain PyTorch on the shared small-segmentation toolkit (:mod:`tasks.segmentation`).

The layer (after the official ``tvseg/dMoE``, ``3d/dmoeunet.py`` and ``2d/networks/vit_seg_modeling.py``;
re-written, not copied):

* ``E`` shared experts, each ``Linear(c, 4c) - ReLU - Linear(4c, c) - Dropout(0.1)``, applied to every
  spatial token (pixel) of a feature map ``h`` (n, c, H, W) seen as (n, H*W, c);
* a **noisy top-k router**: ``logits = W x + b``, ``noisy = logits + N(0, 1) * softplus(W' x + b')``, keep the
  top ``k`` noisy logits, softmax over them (the rest get weight 0); each token's output is the gated sum
  of its ``k`` experts;
* **distribution awareness = one router per attribute group**: the sample's attribute (demographic or
  clinical group) picks which router gates its tokens; the experts are shared by all groups;
* the layer is residual, ``h + MoE(h)``, and sits after every encoder stage of the UNet (the official
  3-D ContextUNETR applies it after each of its 5 encoder stages);
* no load-balancing loss (the official trainers use cross-entropy + Dice only).

Baselines (all through the same TinyUNet and training loop): the plain UNet; the standard MoE, which is
the same layer with a single router (the official ``--vmoe`` switch zeroes the attribute, so every sample
uses router 0); a FiLM adapter (per-group scale and shift: the attribute without any experts); the UNet
trained with group-balanced resampling weights. Negative controls: a dMoE whose routers get a shuffled
attribute (a fixed random permutation of the attribute column, train and test: same capacity, same group
frequencies, no information about the distribution) and the correctly trained dMoE evaluated with every
test image routed to a wrong group ((g + 1) mod G).

Determinism: seeds run in parallel threads, so nothing here touches torch's global RNG after the model
is built (inside ``torch_seeded``): the router noise and the expert dropout draw from a ``torch.Generator``
owned by each layer.
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.dmoe_fair_seg.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.groups import group_summary
from tasks.segmentation import TinyUNet, dice, iou, lesion_images, predict_masks, train_segmentation
from tasks.train import torch_single_thread

METHODS = ("unet", "moe", "dmoe", "dmoe_shuffled", "film", "unet_balanced")


# --------------------------------------------------------------------------------------------- the layer
class NoisyTopkRouters(nn.Module):
    """``n_routers`` noisy top-k routers over ``n_experts`` experts, stored as stacked weights.

    ``forward(x (n, T, c), route (n,) int)`` -> ``(weights (n, T, k), top (n, T, k))``: sample i's tokens are
    gated by router ``route[i]``; ``top`` are each token's top-k experts (largest noisy logit first) and
    ``weights`` their gates, which sum to 1 (every other expert's gate is 0).
    """

    def __init__(self, channels: int, n_experts: int, top_k: int, n_routers: int, generator: torch.Generator):
        super().__init__()
        self.top_k, self.generator = top_k, generator
        # the same default init as one nn.Linear(c, E) per router (uniform +-1/sqrt(c))
        bound = 1.0 / channels ** 0.5
        self.weight = nn.Parameter(torch.empty(n_routers, n_experts, channels).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n_routers, n_experts).uniform_(-bound, bound))
        self.noise_weight = nn.Parameter(torch.empty(n_routers, n_experts, channels).uniform_(-bound, bound))
        self.noise_bias = nn.Parameter(torch.empty(n_routers, n_experts).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, route: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # gather each sample's router (n, E, c): one einsum instead of a Python loop over samples
        logits = torch.einsum("ntc,nec->nte", x, self.weight[route]) + self.bias[route][:, None, :]
        if self.training:  # Shazeer et al.'s noise is a training-time exploration device (see README note)
            scale = F.softplus(torch.einsum("ntc,nec->nte", x, self.noise_weight[route])
                               + self.noise_bias[route][:, None, :])
            noise = torch.randn(logits.shape, generator=self.generator, dtype=logits.dtype)
            logits = logits + noise * scale
        top_logits, top = logits.topk(self.top_k, dim=-1)
        # softmax over the kept logits only = softmax of the logits with -inf outside the top k
        return torch.softmax(top_logits, dim=-1), top


class SparseMoE(nn.Module):
    """Residual sparse MoE on a feature map: ``forward(h (n, c, H, W), route (n,)) -> h + MoE(h)`` (same shape).

    ``n_routers = 1`` is the standard MoE (every sample uses router 0, whatever ``route`` says); ``n_routers
    = G`` is dMoE (router ``route[i]`` for sample i). The experts are shared either way.
    """

    def __init__(self, channels: int, n_experts: int, top_k: int, n_routers: int, expansion: int,
                 dropout: float, generator: torch.Generator):
        super().__init__()
        self.n_routers, self.dropout, self.generator = n_routers, dropout, generator
        self.router = NoisyTopkRouters(channels, n_experts, top_k, n_routers, generator)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(channels, expansion * channels), nn.ReLU(), nn.Linear(expansion * channels, channels))
            for _ in range(n_experts))

    def _dropout(self, y: torch.Tensor) -> torch.Tensor:
        """Inverted dropout from the layer's own generator (``nn.Dropout`` would draw from the global RNG)."""
        if not self.training or self.dropout == 0.0:
            return y
        keep = torch.rand(y.shape, generator=self.generator) >= self.dropout
        return y * keep / (1.0 - self.dropout)

    def mixture(self, tokens: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
        """The MoE output (without the residual) for ``tokens`` (n, T, c): sum_e gate_e(x) expert_e(x)."""
        if self.n_routers == 1:
            route = torch.zeros_like(route)
        weights, top = self.router(tokens, route)
        flat, k = tokens.reshape(-1, tokens.shape[-1]), top.shape[-1]
        # sparse dispatch: one stable sort groups the (token, slot) pairs by expert, tokens ascending within an
        # expert, so expert e sees exactly the tokens that picked it, in token order, in one contiguous block
        chosen = top.reshape(-1)
        order = chosen.argsort(stable=True)
        rows = order.div(k, rounding_mode="floor")
        counts = torch.bincount(chosen, minlength=len(self.experts)).tolist()
        inputs, gates = flat[rows].split(counts), weights.reshape(-1)[order].split(counts)
        outputs = [self._dropout(expert(x)) * g[:, None]
                   for expert, x, g, n in zip(self.experts, inputs, gates, counts) if n]
        # each token's k gated outputs are added in expert order (index_add runs through rows in order)
        out = torch.zeros_like(flat).index_add(0, rows, torch.cat(outputs))
        return out.reshape(tokens.shape)

    def forward(self, h: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
        n, c, height, width = h.shape
        tokens = h.flatten(2).transpose(1, 2)                                   # (n, H*W, c)
        out = tokens + self.mixture(tokens, route)
        return out.transpose(1, 2).reshape(n, c, height, width)


class FiLM(nn.Module):
    """Per-group feature-wise affine modulation ``h * (1 + gamma[g]) + beta[g]`` (starts as the identity):
    the attribute given to the network without experts or routing."""

    def __init__(self, channels: int, n_groups: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(n_groups, channels))
        self.beta = nn.Parameter(torch.zeros(n_groups, channels))

    def forward(self, h: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
        return h * (1.0 + self.gamma[route][:, :, None, None]) + self.beta[route][:, :, None, None]


def adapter_factory(p: Params, kind: str, seed: int) -> Callable[[int], nn.Module] | None:
    """The ``adapter`` hook of :class:`TinyUNet` for one method (None for the plain UNet).

    Each MoE layer gets its own generator, seeded from (seed, layer index), for its noise and dropout.
    """
    if kind in ("unet", "unet_balanced"):
        return None
    if kind == "film":
        return lambda channels: FiLM(channels, p.n_groups)
    layer = itertools.count()
    routers = 1 if kind == "moe" else p.n_groups

    def make(channels: int) -> nn.Module:
        generator = torch.Generator().manual_seed(int(numpy_rng(seed, 7, next(layer)).integers(2 ** 62)))
        return SparseMoE(channels, p.n_experts, p.top_k, routers, p.expansion, p.expert_dropout, generator)

    return make


# --------------------------------------------------------------------------------------------- experiment
def make_data(p: Params, seed: int):
    """The seed's train set (imbalanced groups, ``p.group_probs``) and test set (balanced groups)."""
    train = lesion_images(p.n_train, p.image_size, p.group_probs, numpy_rng(seed, 1))
    test = lesion_images(p.n_test, p.image_size, [1.0 / p.n_groups] * p.n_groups, numpy_rng(seed, 2))
    return train, test


def balanced_weights(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per-sample resampling weights proportional to 1 / (group size): every group carries equal mass."""
    counts = np.bincount(groups, minlength=n_groups).astype(float)
    w = 1.0 / counts[groups]
    return w / w.sum()


def run_method(p: Params, seed: int, method: str) -> list[dict]:
    """Train one method on one seed's data and score it on the balanced test set.

    Returns one row per evaluation: ``{seed, method, evaluation, overall, worst, gap, es, iou, dice_g<k>}``
    (Dice per test image, averaged per true group by :func:`tasks.groups.group_summary`). The dMoE also
    gets a second row, ``evaluation = "misrouted"``: the same model with every test image routed to group
    (g + 1) mod G.
    """
    train, test = make_data(p, seed)
    train_route, test_route = train.groups, test.groups
    if method == "dmoe_shuffled":
        # a fixed random relabelling of the attribute column: the routers see group frequencies but no signal
        train_route = numpy_rng(seed, 3).permutation(train.groups)
        test_route = numpy_rng(seed, 4).permutation(test.groups)
    weights = balanced_weights(train.groups, p.n_groups) if method == "unet_balanced" else None
    with torch_single_thread():
        with torch_seeded(int(numpy_rng(seed, 5).integers(2 ** 62))):   # seeded init (global RNG, under a lock)
            model = TinyUNet(widths=tuple(p.widths), in_channels=1, adapter=adapter_factory(p, method, seed))
        losses = train_segmentation(model, train.images, train.masks, train_route, epochs=p.epochs,
                                    batch_size=p.batch_size, lr=p.lr, seed=seed, sample_weights=weights)
        evaluations = {"true": test_route}
        if method == "dmoe":
            evaluations["misrouted"] = (test.groups + 1) % p.n_groups
        rows = []
        for name, route in evaluations.items():
            pred = predict_masks(model, test.images, route)
            per_image = dice(pred, test.masks)
            s = group_summary(per_image, test.groups)
            rows.append({"seed": seed, "method": method, "evaluation": name, "overall": s["overall"],
                         "worst": s["worst"], "gap": s["gap"], "es": s["es"],
                         "iou": float(iou(pred, test.masks).mean()), "final_loss": float(losses[-1]),
                         **{f"dice_g{g}": float(s["per_group"].get(g, np.nan)) for g in range(p.n_groups)}})
    return rows
