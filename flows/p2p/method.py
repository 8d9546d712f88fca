"""P2P (From Pixels to Perception): instance-wise *grouped* feature selection for interpretable image
predictions, on semi-synthetic digits-on-clutter images with known object masks; read top to bottom.

1. **Data.** 8x8 scikit-learn digits, up-sampled 2x, pasted on a 32x32 canvas of smoothed-noise texture
   with 2-4 bright distractor shapes; the ground-truth relevant mask is the set of digit pixels. A
   *confounded* variant adds a 4x4 square whose position encodes the class in the train split only.
   SLIC superpixels (scikit-image) are computed once per image.
2. **Model.** A selector CNN gives per-pixel logits, mean-pooled per superpixel (the groups); a mask keeps
   the highest-scoring groups up to a kept-area fraction r; the predictor CNN sees only the masked image
   (dropped pixels set to the train mean). Training: r is drawn per instance from U(r_min, r_max) so the
   predictor is calibrated at every sparsity; the hard top-r mask is relaxed by logistic (Gumbel-sigmoid)
   noise and a sigmoid at temperature T around the top-r threshold, straight-through.
3. **Dynamic sparsity.** At test time groups are added in decreasing score order (on a grid of kept
   fractions) until the predictor's softmax confidence reaches tau; that level is the instance's sparsity.
4. **Baselines,** same backbones: the identical model with 1-pixel groups (pixel-level selection); the
   same P2P model at one global kept fraction (fixed sparsity); a black-box CNN with gradient x input
   saliency thresholded to the same kept fraction; a global (non-instance, LASSO-like) learned mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage
from skimage.segmentation import slic
from sklearn.datasets import load_digits
from torch import nn

from flows.p2p.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.train import torch_single_thread

SIDE = 32             # canvas side (pixels)
DIGIT = 16            # side of the 2x up-sampled digit
N_CLASSES = 10
SPUR = 4              # side of the confounding square
# the confounder's 10 class positions (row, col): five on the top border strip, five on the bottom one;
# digits are pasted in rows/cols [4, 28), so a confounder never overlaps a digit
SPUR_POS = [(0, c) for c in (1, 7, 13, 19, 25)] + [(SIDE - SPUR, c) for c in (3, 9, 15, 21, 27)]


# ---------------------------------------------------------------------------- data
@dataclass
class Images:
    """One split: ``x`` (n, 32, 32) float32 in [0, 1], ``y`` (n,) int64, ``digit`` (n, 32, 32) bool (ground
    truth relevant pixels), ``spur`` (n, 32, 32) bool (confounder pixels; all False without one),
    ``seg`` (n, 32, 32) int64 SLIC labels 0..S_i-1."""

    x: np.ndarray
    y: np.ndarray
    digit: np.ndarray
    spur: np.ndarray
    seg: np.ndarray


def texture(rng: np.random.Generator, n: int) -> np.ndarray:
    """Smoothed-noise backgrounds (n, 32, 32) in [0, 0.4]: Gaussian-filtered white noise, min-max scaled."""
    noise = ndimage.gaussian_filter(rng.random((n, SIDE, SIDE)), sigma=(0, 2, 2))
    lo, hi = noise.min(axis=(1, 2), keepdims=True), noise.max(axis=(1, 2), keepdims=True)
    return 0.4 * (noise - lo) / (hi - lo)


def draw_distractors(img: np.ndarray, rng: np.random.Generator) -> None:
    """2-4 bright random rectangles, discs or bars (intensity 0.6-1.0, as bright as digit strokes), in place."""
    rows, cols = np.mgrid[:SIDE, :SIDE]
    for _ in range(rng.integers(2, 5)):
        kind, size = rng.integers(3), rng.integers(3, 8)
        r0, c0 = rng.integers(0, SIDE - size, 2)
        if kind == 0:
            shape = (rows >= r0) & (rows < r0 + size) & (cols >= c0) & (cols < c0 + size)
        elif kind == 1:
            shape = (rows - r0 - size / 2) ** 2 + (cols - c0 - size / 2) ** 2 <= (size / 2) ** 2
        else:
            shape = (rows >= r0) & (rows < r0 + 2) & (cols >= c0) & (cols < c0 + 2 * size)
        img[shape] = rng.uniform(0.6, 1.0)


def superpixels(x: np.ndarray, n_segments: int, compactness: float) -> np.ndarray:
    """SLIC labels (n, 32, 32), int64, relabelled 0..S_i-1 per image (SLIC may skip labels)."""
    seg = np.empty(x.shape, dtype=np.int64)
    for i, img in enumerate(x):
        lab = slic(img, n_segments=n_segments, compactness=compactness, channel_axis=None, start_label=0)
        seg[i] = np.unique(lab, return_inverse=True)[1].reshape(lab.shape)
    return seg


def compose(p: Params, digits: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator,
            confound: float | None) -> Images:
    """``n`` digits-on-clutter images drawn from ``digits`` (m, 8, 8) in [0, 16] with ``labels`` (m,).

    ``confound``: None for no confounder; else the probability that the confounding square sits at the
    image's class position (otherwise at a uniformly random one of the 10 positions)."""
    pick = rng.integers(0, len(digits), n)
    background = texture(rng, n).astype(np.float32)
    x = background.copy()
    digit = np.zeros((n, SIDE, SIDE), bool)
    spur = np.zeros((n, SIDE, SIDE), bool)
    for i, j in enumerate(pick):
        draw_distractors(x[i], rng)
        up = np.kron(digits[j] / 16.0, np.ones((2, 2)))            # (16, 16) nearest-neighbour 2x
        stroke = up > p.stroke_threshold
        r0, c0 = rng.integers(SPUR, SIDE - SPUR - DIGIT + 1, 2)     # keeps the border strips free
        window = (slice(r0, r0 + DIGIT), slice(c0, c0 + DIGIT))
        # distractors stay off the digit's box (texture only there), so the object itself is intact
        x[i][window] = np.where(stroke, 0.5 + 0.5 * up, background[i][window])
        digit[i][window] = stroke
        if confound is not None:
            k = labels[j] if rng.random() < confound else rng.integers(N_CLASSES)
            r, c = SPUR_POS[k]
            x[i, r:r + SPUR, c:c + SPUR] = 0.8
            spur[i, r:r + SPUR, c:c + SPUR] = True
            digit[i, r:r + SPUR, c:c + SPUR] = False                # (never overlaps; kept for clarity)
    return Images(x, labels[pick].astype(np.int64), digit, spur, superpixels(x, p.n_segments, p.compactness))


def make_data(p: Params, seed: int) -> dict[str, Images]:
    """The run's data sets, from one data seed: ``clean_train``/``clean_test`` and ``conf_train`` (class-
    correlated confounder) / ``conf_test`` (confounder present, position independent of the class).
    Train and test images use disjoint source digits (75% / 25% of scikit-learn's 1,797)."""
    bunch = load_digits()
    rng = numpy_rng(seed, 0)
    order = rng.permutation(len(bunch.target))
    cut = int(0.75 * len(order))
    tr, te = order[:cut], order[cut:]
    D, Y = bunch.images, bunch.target
    return {
        "clean_train": compose(p, D[tr], Y[tr], p.n_train, numpy_rng(seed, 1), None),
        "clean_test": compose(p, D[te], Y[te], p.n_test, numpy_rng(seed, 2), None),
        "conf_train": compose(p, D[tr], Y[tr], p.n_train, numpy_rng(seed, 3), p.confound_rate),
        "conf_test": compose(p, D[te], Y[te], p.n_test, numpy_rng(seed, 4), 0.0),
    }


def superpixel_purity(split: Images) -> float:
    """Share of pixels whose superpixel's majority (digit / not digit) matches their own label."""
    total = 0.0
    for seg, digit in zip(split.seg, split.digit):
        area = np.bincount(seg.ravel())
        on = np.bincount(seg.ravel(), weights=digit.ravel().astype(float), minlength=len(area))
        total += np.maximum(on, area - on).sum()
    return float(total / split.seg.size)


# ---------------------------------------------------------------------------- groups and masks
def pixel_groups(n: int) -> np.ndarray:
    """The pixel-level baseline's groups: every pixel its own group, (n, 32, 32) labels 0..1023."""
    return np.broadcast_to(np.arange(SIDE * SIDE).reshape(SIDE, SIDE), (n, SIDE, SIDE)).copy()


def pool_groups(logits: torch.Tensor, seg: torch.Tensor, n_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of per-pixel ``logits`` (B, P) over each group of ``seg`` (B, P) (labels < n_groups):
    scores (B, n_groups) (-inf for empty groups) and areas (B, n_groups) in pixels."""
    B = logits.shape[0]
    area = torch.zeros(B, n_groups).scatter_add_(1, seg, torch.ones_like(logits))
    total = torch.zeros(B, n_groups).scatter_add(1, seg, logits)
    score = torch.where(area > 0, total / area.clamp(min=1), torch.full_like(total, -torch.inf))
    return score, area


def top_area(score: torch.Tensor, area: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hard top-r selection: keep groups in decreasing ``score`` (B, G) order while the area kept *before*
    a group is below ``r`` (B,) times the image area, i.e. the smallest top set covering at least r.

    Returns keep (B, G) in {0, 1} and the threshold (B,) halfway between the last kept and the first
    dropped score (the centre of the relaxation)."""
    score = torch.where(area > 0, score, torch.full_like(score, -torch.inf))   # empty groups sort last
    order = score.argsort(dim=1, descending=True)
    a = area.gather(1, order)
    before = a.cumsum(1) - a
    keep_sorted = (before < r[:, None] * area.sum(1, keepdim=True)) & (a > 0)
    keep = torch.zeros_like(score).scatter(1, order, keep_sorted.to(score.dtype))
    s = score.gather(1, order)
    n_keep = keep_sorted.sum(1).clamp(min=1)
    last = s.gather(1, (n_keep - 1)[:, None]).squeeze(1)
    nxt = s.gather(1, n_keep.clamp(max=s.shape[1] - 1)[:, None]).squeeze(1)
    nxt = torch.where(torch.isfinite(nxt) & (n_keep < s.shape[1]), nxt, last - 1.0)
    return keep, (last + nxt) / 2


def relaxed_mask(score: torch.Tensor, area: torch.Tensor, r: torch.Tensor, temperature: float,
                 noise: torch.Tensor | None) -> torch.Tensor:
    """Straight-through Gumbel-sigmoid top-r mask over groups, (B, G): forward the hard top-r set of the
    noisy scores, backward the gradient of sigmoid((score + noise - threshold) / temperature)."""
    z = score if noise is None else score + noise
    z = torch.where(area > 0, z, torch.full_like(z, -torch.inf))
    hard, threshold = top_area(z.detach(), area, r)
    soft = torch.sigmoid((z - threshold.detach()[:, None]) / temperature)
    soft = torch.where(area > 0, soft, torch.zeros_like(soft))
    return hard + soft - soft.detach()


def logistic_noise(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Logistic(0, 1) noise = difference of two Gumbels: the Gumbel-sigmoid (binary Concrete) perturbation."""
    u = torch.rand(shape, generator=generator).clamp(1e-6, 1 - 1e-6)
    return u.log() - (-u).log1p()


# ---------------------------------------------------------------------------- networks
class Standardize(nn.Module):
    """(x - mean) / std with the train split's pixel statistics: a dropped pixel (set to the mean) becomes 0,
    and inputs centred at 0 let the small CNNs leave the chance-level plateau (uncentred [0, 1] inputs kept
    some seeds at loss log 10 for all epochs)."""

    def __init__(self, mean: float, std: float):
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


def selector_net(mean: float = 0.0, std: float = 1.0) -> nn.Module:
    """Per-pixel logits (B, 1, 32, 32) from an image (B, 1, 32, 32): standardization, 3 conv layers (the
    middle ones at half resolution, cheaper), up-sampled back."""
    return nn.Sequential(Standardize(mean, std), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1),
                         nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False))


class _ChannelsLastMaxPool(torch.autograd.Function):
    """2x2 max-pool computed in channels-last memory, taking and giving ordinary (NCHW) tensors, gradients
    included. Torch's CPU kernel is several times faster channels-last than NCHW on these few-channel maps,
    and both keep the first maximum of each window, so outputs and gradients are the same bits; the
    gradient goes back NCHW (a channels-last one would make the ReLU and conv backward before it slow)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)
        y, argmax = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
        ctx.save_for_backward(x, argmax)
        return y.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        x, argmax = ctx.saved_tensors
        grad = grad.contiguous(memory_format=torch.channels_last)
        return torch.ops.aten.max_pool2d_with_indices_backward(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False,
                                                               argmax).contiguous()


class MaxPool2(nn.Module):
    """``nn.MaxPool2d(2)``, computed channels-last (:class:`_ChannelsLastMaxPool`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ChannelsLastMaxPool.apply(x)


def predictor_net(mean: float = 0.0, std: float = 1.0) -> nn.Module:
    """Class logits (B, 10) from a (masked) image (B, 1, 32, 32): standardization, 3 conv + max-pool
    layers, a linear head."""
    return nn.Sequential(Standardize(mean, std), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), MaxPool2(),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), MaxPool2(),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), MaxPool2(),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, N_CLASSES))


class Selective(nn.Module):
    """Selector + predictor. ``kind``: "instance" (a selector CNN, P2P and the pixel-level baseline) or
    "global" (one learned logit per pixel shared by every image: the LASSO-like global mask)."""

    def __init__(self, kind: str, fill: float, std: float = 1.0):
        super().__init__()
        self.kind = kind
        self.fill = fill
        self.selector = selector_net(fill, std) if kind == "instance" else None
        self.global_logits = nn.Parameter(torch.zeros(SIDE * SIDE)) if kind == "global" else None
        self.predictor = predictor_net(fill, std)

    def pixel_logits(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 1024) selection logits per pixel."""
        if self.kind == "global":
            return self.global_logits.expand(len(x), -1)
        return self.selector(x[:, None]).flatten(1)

    def scores(self, x: torch.Tensor, seg: torch.Tensor, n_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
        return pool_groups(self.pixel_logits(x), seg.flatten(1), n_groups)

    def predict_masked(self, x: torch.Tensor, pixel_mask: torch.Tensor) -> torch.Tensor:
        """Class logits (B, 10) of the image ``x`` (B, 32, 32) with ``pixel_mask`` (B, 1024): dropped
        pixels are set to the train mean, so the predictor sees nothing of them."""
        m = pixel_mask.view_as(x)
        return self.predictor((m * x + (1 - m) * self.fill)[:, None])


def expand(group_mask: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """Group mask (B, G) -> pixel mask (B, 1024)."""
    return group_mask.gather(1, seg.flatten(1))


# ---------------------------------------------------------------------------- training
def train_selective(p: Params, kind: str, x: np.ndarray, y: np.ndarray, seg: np.ndarray, seed: int) -> Selective:
    """Train selector and predictor jointly with cross-entropy on masked images; the kept fraction r is
    drawn per instance from U(r_min, r_max) so the predictor is calibrated at every sparsity level."""
    X, Y, S = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(seg)
    n_groups = int(seg.max()) + 1
    with torch_seeded(seed):
        model = Selective(kind, float(x.mean()), float(x.std()))
    params = [{"params": model.predictor.parameters()},
              {"params": model.selector.parameters() if kind == "instance" else [model.global_logits],
               "lr": p.lr if kind == "instance" else p.lr_global}]
    optimiser = torch.optim.Adam(params, lr=p.lr)
    gen = torch_generator(seed + 1)
    for _ in range(p.epochs):
        order = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), p.batch_size):
            idx = order[start:start + p.batch_size]
            xb, sb = X[idx], S[idx]
            score, area = model.scores(xb, sb, n_groups)
            r = p.r_min + (p.r_max - p.r_min) * torch.rand(len(idx), generator=gen)
            gm = relaxed_mask(score, area, r, p.temperature, logistic_noise(score.shape, gen))
            loss = F.cross_entropy(model.predict_masked(xb, expand(gm, sb)), Y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    return model


def train_blackbox(p: Params, x: np.ndarray, y: np.ndarray, seed: int) -> nn.Module:
    """The black-box CNN: the predictor architecture on full images, same optimiser and epochs."""
    X, Y = torch.from_numpy(x)[:, None], torch.from_numpy(y)
    with torch_seeded(seed):
        model = predictor_net(float(x.mean()), float(x.std()))
    optimiser = torch.optim.Adam(model.parameters(), lr=p.lr)
    gen = torch_generator(seed + 1)
    for _ in range(p.epochs):
        order = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), p.batch_size):
            idx = order[start:start + p.batch_size]
            loss = F.cross_entropy(model(X[idx]), Y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    model.eval()
    return model


# ---------------------------------------------------------------------------- evaluation
@torch.no_grad()
def sweep(model: Selective, x: np.ndarray, seg: np.ndarray, levels: list[float],
          score: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """The model at every kept fraction of ``levels`` (L,): ``prob`` (L, n, 10) softmax, ``kept`` (L, n)
    kept-area fraction, ``masks`` (L, n, 1024) bool. ``score`` (n, G) replaces the selector's scores
    (the random-selection control)."""
    X, S = torch.from_numpy(x), torch.from_numpy(seg)
    n_groups = int(seg.max()) + 1
    own, area = model.scores(X, S, n_groups)
    score = own if score is None else torch.where(area > 0, score, torch.full_like(score, -torch.inf))
    probs, kept, masks = [], [], []
    for r in levels:
        keep, _ = top_area(score, area, torch.full((len(X),), float(r)))
        pm = expand(keep, S)
        probs.append(F.softmax(model.predict_masked(X, pm), dim=1).numpy())
        kept.append(pm.mean(1).numpy())
        masks.append(pm.numpy() > 0.5)
    return {"prob": np.stack(probs), "kept": np.stack(kept), "masks": np.stack(masks)}


def dynamic_level(prob: np.ndarray, tau: float) -> np.ndarray:
    """P2P's per-instance sparsity: the first level (index into the sweep, (n,)) whose softmax confidence
    reaches ``tau``; the last (densest) level when none does. ``prob``: (L, n, 10)."""
    confident = prob.max(axis=2) >= tau
    return np.where(confident.any(axis=0), confident.argmax(axis=0), prob.shape[0] - 1)


def at_levels(sw: dict[str, np.ndarray], level: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Accuracy and mean kept fraction when instance i uses sweep level ``level[i]``."""
    i = np.arange(len(y))
    return {"acc": float((sw["prob"][level, i].argmax(1) == y).mean()), "kept": float(sw["kept"][level, i].mean())}


def fixed_kept_at_accuracy(sw: dict[str, np.ndarray], y: np.ndarray, target: float) -> float:
    """Fixed (global) sparsity matched in accuracy: the mean kept fraction at which the sweep's accuracy curve
    first reaches ``target``, linearly interpolated between the two sweep levels around the crossing (so the
    grid's coarseness does not favour the dynamic rule); the densest level's when the curve never reaches it."""
    acc = (sw["prob"].argmax(2) == y[None]).mean(1)
    kept = sw["kept"].mean(1)
    ok = np.flatnonzero(acc >= target)
    if ok.size == 0:
        return float(kept[-1])
    j = ok[0]
    if j == 0:
        return float(kept[0])
    w = (target - acc[j - 1]) / (acc[j] - acc[j - 1])
    return float(kept[j - 1] + w * (kept[j] - kept[j - 1]))


def precision(masks: np.ndarray, target: np.ndarray) -> float:
    """Share of kept pixels inside ``target``: masks and target (n, 1024) bool, pooled over images."""
    return float((masks & target).sum() / max(masks.sum(), 1))


def saliency(model: nn.Module, x: np.ndarray, fill: float) -> np.ndarray:
    """Gradient x input of the predicted class logit (input taken relative to the fill value, the same
    reference the masked models use), absolute value, (n, 1024)."""
    X = torch.from_numpy(x)[:, None].clone().requires_grad_(True)
    logits = model(X)
    logits.gather(1, logits.argmax(1, keepdim=True)).sum().backward()
    return ((X.grad * (X.detach() - fill)).abs()).flatten(1).numpy()


def top_pixels(values: np.ndarray, r: float) -> np.ndarray:
    """Boolean mask (n, 1024) of the ceil(r * 1024) highest ``values`` (n, 1024) per row (ties by index)."""
    k = int(np.ceil(r * values.shape[1]))
    idx = np.argsort(-values, axis=1, kind="stable")[:, :k]
    out = np.zeros(values.shape, bool)
    np.put_along_axis(out, idx, True, axis=1)
    return out


# ---------------------------------------------------------------------------- one seed
def run_seed(p: Params, seed: int) -> dict:
    """Every model and metric of one seed: its own data draw (images, placements, clutter, superpixels) and its
    own training randomness, so that the intervals over seeds cover both. Returns a flat dict of per-seed numbers
    plus ``curves`` (accuracy / kept fraction of the sweeps) for the figure."""
    data = make_data(p, seed)
    tr, te, ctr, cte = data["clean_train"], data["clean_test"], data["conf_train"], data["conf_test"]
    levels = list(p.levels)
    r_eval = p.r_eval
    i_eval = levels.index(r_eval)
    out: dict = {"seed": seed, "superpixel_purity": superpixel_purity(te), "digit_fraction": float(te.digit.mean()),
                 "superpixels_per_image": float(np.mean([g.max() + 1 for g in te.seg]))}
    digit = te.digit.reshape(len(te.y), -1)
    with torch_single_thread():
        # -- clean data: P2P (superpixels), pixel-level, global mask, black box
        p2p = train_selective(p, "instance", tr.x, tr.y, tr.seg, seed)
        pix = train_selective(p, "instance", tr.x, tr.y, pixel_groups(len(tr.y)), seed)
        glob = train_selective(p, "global", tr.x, tr.y, pixel_groups(len(tr.y)), seed)
        box = train_blackbox(p, tr.x, tr.y, seed)

        sw = sweep(p2p, te.x, te.seg, levels)
        sw_pix = sweep(pix, te.x, pixel_groups(len(te.y)), levels)
        sw_glob = sweep(glob, te.x, pixel_groups(len(te.y)), levels)
        rand_scores = torch.rand((len(te.y), int(te.seg.max()) + 1), generator=torch_generator(seed + 7))
        sw_rand = sweep(p2p, te.x, te.seg, levels, score=rand_scores)
        fill = float(tr.x.mean())
        sal = saliency(box, te.x, fill)
        with torch.no_grad():
            out["acc_blackbox"] = float((box(torch.from_numpy(te.x)[:, None]).argmax(1).numpy() == te.y).mean())

        for name, s in (("p2p", sw), ("pixel", sw_pix), ("global", sw_glob), ("random_sp", sw_rand)):
            out[f"prec_{name}"] = precision(s["masks"][i_eval], digit)
            out[f"acc_{name}"] = float((s["prob"][i_eval].argmax(1) == te.y).mean())
            out[f"kept_{name}"] = float(s["kept"][i_eval].mean())
            out[f"curve_acc_{name}"] = [float(a) for a in (s["prob"].argmax(2) == te.y[None]).mean(1)]
            out[f"curve_kept_{name}"] = [float(k) for k in s["kept"].mean(1)]
        out["prec_saliency"] = precision(top_pixels(sal, r_eval), digit)
        out["prec_digit_rate"] = float(digit.mean())

        # -- dynamic sparsity against the same model at one global level, matched in accuracy
        lvl = dynamic_level(sw["prob"], p.tau)
        dyn = at_levels(sw, lvl, te.y)
        out["acc_dynamic"], out["kept_dynamic"] = dyn["acc"], dyn["kept"]
        out["kept_fixed_matched"] = fixed_kept_at_accuracy(sw, te.y, dyn["acc"])
        perm = at_levels(sw, numpy_rng(seed, 9).permutation(lvl), te.y)   # budgets shuffled across images
        out["acc_permuted"], out["kept_permuted"] = perm["acc"], perm["kept"]
        out["kept_fixed_matched_permuted"] = fixed_kept_at_accuracy(sw, te.y, perm["acc"])
        out["prec_dynamic"] = precision(sw["masks"][lvl, np.arange(len(te.y))], digit)

        # -- confounded data: where do P2P, the saliency map and the global mask put their kept pixels?
        cp2p = train_selective(p, "instance", ctr.x, ctr.y, ctr.seg, seed)
        cglob = train_selective(p, "global", ctr.x, ctr.y, pixel_groups(len(ctr.y)), seed)
        cbox = train_blackbox(p, ctr.x, ctr.y, seed)
        spur = cte.spur.reshape(len(cte.y), -1)
        cdig = cte.digit.reshape(len(cte.y), -1)
        csw = sweep(cp2p, cte.x, cte.seg, levels)
        cgl = sweep(cglob, cte.x, pixel_groups(len(cte.y)), levels)
        csal = top_pixels(saliency(cbox, cte.x, float(ctr.x.mean())), r_eval)
        for name, m in (("p2p", csw["masks"][i_eval]), ("global", cgl["masks"][i_eval]), ("saliency", csal)):
            out[f"conf_spur_{name}"] = precision(m, spur)
            out[f"conf_prec_{name}"] = precision(m, cdig)
        out["conf_acc_p2p"] = float((csw["prob"][i_eval].argmax(1) == cte.y).mean())
        out["conf_acc_global"] = float((cgl["prob"][i_eval].argmax(1) == cte.y).mean())
        with torch.no_grad():
            out["conf_acc_blackbox"] = float((cbox(torch.from_numpy(cte.x)[:, None]).argmax(1).numpy() == cte.y).mean())
        out["conf_spur_rate"] = float(spur.mean())
    return out
