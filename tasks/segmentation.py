"""Small 2-D segmentation: overlap metrics, synthetic lesion images with a group attribute, and a tiny U-Net.

The images stand in for medical scans whose appearance depends on a demographic or clinical group (FairSeg-style
studies): each group forms its images differently (lesion polarity, blur, background texture, lesion size), and
the groups are imbalanced, so a model trained on the pooled data serves the minority groups worse.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from scipy import ndimage
from torch import nn
from torch.nn import functional as F

from paperflows.core.seeding import numpy_rng, torch_seeded


def _overlap(pred: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pred, target = np.asarray(pred, dtype=bool), np.asarray(target, dtype=bool)
    if pred.shape != target.shape or pred.ndim != 3:
        raise ValueError(f"pred {pred.shape} and target {target.shape} must both be (n, H, W)")
    inter = (pred & target).sum(axis=(1, 2))
    return inter, pred.sum(axis=(1, 2)), target.sum(axis=(1, 2))


def dice(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Dice 2|P∩T| / (|P| + |T|) per image of boolean masks (n, H, W) -> (n,); two empty masks score 1."""
    inter, p, t = _overlap(pred, target)
    denominator = p + t
    return np.where(denominator == 0, 1.0, 2 * inter / np.maximum(denominator, 1))


def iou(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Intersection over union per image of boolean masks (n, H, W) -> (n,); two empty masks score 1."""
    inter, p, t = _overlap(pred, target)
    union = p + t - inter
    return np.where(union == 0, 1.0, inter / np.maximum(union, 1))


@dataclass(frozen=True)
class GroupLook:
    """How one group's images are formed."""

    polarity: float  # lesion intensity relative to the background: +1 bright, -1 dark
    contrast: float  # lesion amplitude
    blur: float  # Gaussian blur sigma in pixels
    texture_frequency: float  # background sinusoid frequency, cycles per image
    radius: tuple[float, float]  # lesion semi-axis range, as a fraction of the image side


GROUP_LOOKS = (
    GroupLook(polarity=1.0, contrast=1.0, blur=0.5, texture_frequency=2.0, radius=(0.12, 0.25)),
    GroupLook(polarity=-1.0, contrast=0.8, blur=1.0, texture_frequency=4.0, radius=(0.10, 0.20)),
    GroupLook(polarity=1.0, contrast=0.5, blur=1.5, texture_frequency=7.0, radius=(0.06, 0.14)),
)


@dataclass
class SegmentationSet:
    images: np.ndarray  # (n, 1, H, W) float32, roughly zero-mean unit-scale
    masks: np.ndarray  # (n, H, W) bool
    groups: np.ndarray  # (n,) int


def lesion_images(n: int, size: int, group_probs: Sequence[float], rng: np.random.Generator,
                  looks: Sequence[GroupLook] = GROUP_LOOKS, noise: float = 0.3) -> SegmentationSet:
    """``n`` images of side ``size``, each with one rotated elliptical lesion and its mask.

    The group of each image is drawn with ``group_probs`` (one per entry of ``looks``); the group decides the
    lesion's polarity, contrast and size, the blur, and the background texture frequency. Pixel noise has std
    ``noise``.
    """
    probs = np.asarray(group_probs, dtype=float)
    if len(probs) != len(looks) or np.any(probs < 0) or not np.isclose(probs.sum(), 1):
        raise ValueError(f"group_probs must be {len(looks)} non-negative shares summing to 1, got {list(group_probs)}")
    groups = rng.choice(len(looks), size=n, p=probs)
    yy, xx = np.meshgrid(np.arange(size) + 0.5, np.arange(size) + 0.5, indexing="ij")
    images = np.empty((n, size, size))
    masks = np.empty((n, size, size), dtype=bool)
    for g, look in enumerate(looks):
        rows = np.flatnonzero(groups == g)
        m = len(rows)
        if m == 0:
            continue
        centre = rng.uniform(0.3, 0.7, (m, 2)) * size
        semi = rng.uniform(*look.radius, (m, 2)) * size
        angle = rng.uniform(0, np.pi, m)
        dy, dx = yy[None] - centre[:, 0, None, None], xx[None] - centre[:, 1, None, None]
        cos, sin = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
        u, v = (cos * dx + sin * dy) / semi[:, 1, None, None], (-sin * dx + cos * dy) / semi[:, 0, None, None]
        lesion = u**2 + v**2 <= 1.0
        phase = rng.uniform(0, 2 * np.pi, (m, 2))
        k = 2 * np.pi * look.texture_frequency / size
        texture = 0.5 * (np.sin(k * xx[None] + phase[:, 0, None, None]) * np.sin(k * yy[None] + phase[:, 1, None, None]))
        clean = texture + look.polarity * look.contrast * lesion
        clean = ndimage.gaussian_filter(clean, sigma=(0, look.blur, look.blur))
        images[rows] = clean + noise * rng.standard_normal(clean.shape)
        masks[rows] = lesion
    return SegmentationSet(images[:, None].astype(np.float32), masks, groups.astype(int))


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(), nn.Conv2d(c_out, c_out, 3, padding=1), nn.ReLU())


class TinyUNet(nn.Module):
    """A U-Net with ``len(widths)`` levels: input (n, C, H, W), H and W divisible by 2^(levels-1) -> logits (n, H, W).

    ``adapter(c)`` builds a module called as ``module(h, groups)`` on each encoder level's output ``h``
    (n, c, h, w): the place where a mixture of experts, a FiLM layer or any attribute-aware block plugs in.
    """

    def __init__(self, widths: Sequence[int] = (16, 32, 64), in_channels: int = 1,
                 adapter: Callable[[int], nn.Module] | None = None) -> None:
        super().__init__()
        widths = list(widths)
        self.encoders = nn.ModuleList(_conv_block(c_in, c_out) for c_in, c_out in zip([in_channels] + widths[:-1], widths))
        self.adapters = nn.ModuleList(adapter(c) for c in widths) if adapter is not None else None
        self.ups = nn.ModuleList(nn.ConvTranspose2d(c_deep, c_skip, 2, stride=2)
                                 for c_deep, c_skip in zip(widths[:0:-1], widths[-2::-1]))
        self.decoders = nn.ModuleList(_conv_block(2 * c, c) for c in widths[-2::-1])
        self.head = nn.Conv2d(widths[0], 1, 1)

    def forward(self, x: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
        skips = []
        for level, encoder in enumerate(self.encoders):
            if level > 0:
                x = F.max_pool2d(x, 2)
            x = encoder(x)
            if self.adapters is not None:
                x = self.adapters[level](x, groups)
            skips.append(x)
        for up, decoder, skip in zip(self.ups, self.decoders, skips[-2::-1]):
            x = decoder(torch.cat([up(x), skip], dim=1))
        return self.head(x)[:, 0]


def segmentation_loss(logits: torch.Tensor, masks: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Binary cross-entropy plus soft Dice loss, per image, averaged with optional per-image ``weights`` (n,)."""
    bce = F.binary_cross_entropy_with_logits(logits, masks, reduction="none").mean(dim=(1, 2))
    prob = torch.sigmoid(logits)
    soft_dice = (2 * (prob * masks).sum(dim=(1, 2)) + 1) / (prob.sum(dim=(1, 2)) + masks.sum(dim=(1, 2)) + 1)
    per_image = bce + 1 - soft_dice
    if weights is None:
        return per_image.mean()
    return (weights * per_image).sum() / weights.sum()


def train_segmentation(model: nn.Module, images: np.ndarray, masks: np.ndarray, groups: np.ndarray, *, epochs: int,
                       batch_size: int, lr: float, seed: int, sample_weights: np.ndarray | None = None,
                       extra_loss: Callable[[], torch.Tensor] | None = None,
                       uses_global_rng: bool = False) -> list[float]:
    """Adam on BCE + soft Dice; returns the mean loss per epoch.

    ``sample_weights`` (n,) weight each image's loss (e.g. group balancing); ``extra_loss()`` is added to every
    batch's loss after the forward pass (e.g. a mixture-of-experts balance loss the model stored). With
    ``uses_global_rng`` (dropout, noisy gates) training holds torch's global-RNG lock under ``seed``, so concurrent
    seeds stay reproducible but run one at a time.
    """
    x, y, g = torch.from_numpy(images), torch.from_numpy(masks.astype(np.float32)), torch.from_numpy(groups)
    w = None if sample_weights is None else torch.as_tensor(sample_weights, dtype=torch.float32)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    rng = numpy_rng(seed)
    history = []
    with torch_seeded(seed) if uses_global_rng else contextlib.nullcontext():
        model.train()
        for _ in range(epochs):
            order = torch.from_numpy(rng.permutation(len(x)))
            total = 0.0
            for start in range(0, len(x), batch_size):
                idx = order[start:start + batch_size]
                optimiser.zero_grad()
                loss = segmentation_loss(model(x[idx], g[idx]), y[idx], None if w is None else w[idx])
                if extra_loss is not None:
                    loss = loss + extra_loss()
                loss.backward()
                optimiser.step()
                total += float(loss.detach()) * len(idx)
            history.append(total / len(x))
        model.eval()
    return history


@torch.no_grad()
def predict_masks(model: nn.Module, images: np.ndarray, groups: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Boolean masks (n, H, W): logit > 0, in eval mode."""
    model.eval()
    x, g = torch.from_numpy(images), torch.from_numpy(groups)
    logits = torch.cat([model(x[i:i + batch_size], g[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    return (logits > 0).numpy()
