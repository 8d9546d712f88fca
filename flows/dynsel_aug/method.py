"""Joint dynamic data selection and augmentation (Yang, Ye, Shen & Zhou, ICML 2025), at laptop scale.

Setting. A small CNN learns scikit-learn's 8x8 digits from a training pool, optionally with symmetric label
noise. Every method trains through the shared loop :func:`tasks.selection.train_with_selection` (same
initialisation, optimiser, epochs and batch size); only its *policy* differs: which pool rows it trains on at
each epoch, with which loss weights, and which rows it augments. "Equal compute" is the loop's exact count of
training forward+backward passes (``Budget.samples_seen``).

The method (the paper's idea as far as the abstract, the plan and an unofficial reimplementation confirm it):

1. Local density: rho_i = mean Euclidean distance of sample i to its ``density_k`` nearest pool neighbours in the
   current model's penultimate-feature space (:func:`tasks.selection.knn_density`); min-max normalised to
   p_rho in [0, 1]. Large = sparse = rare = worth keeping (unofficial code, "Formula 1").
2. Multimodal semantic consistency. The paper scores image-text agreement with CLIP; here [ours, the plan's
   stand-in] the image encoder is the current CNN's penultimate layer, the text encoder is MiniLM on
   ``"a handwritten digit {name}"``, and an affine image->text projection is aligned contrastively (CLIP's
   softmax over the class prompts) on a small *clean* reference split at every rescoring. c_i =
   |cos(proj(h_i), text(y_i))| with the pool's (possibly noisy) label y_i, min-max normalised to p_c
   (unofficial code, "Formula 2": absolute cosine, min-max).
3. Joint score p_rho * p_c (unofficial code, "Formula 3"), then a per-class selection of ``fraction`` of each
   class: sampled without replacement with probability proportional to the score (the plan) or the top
   scores (the unofficial code), by ``selection_rule``.
4. Every selected sample is augmented (random shift and rotation): density favours rare samples, which
   augmentation diversifies; consistency keeps mislabeled or ambiguous samples, which augmentation would only
   amplify, out of the subset.

Baselines and ablations (all through the same loop): full data; random dynamic selection (a fresh uniform
``fraction`` of the pool per epoch), and a second random run on another random stream (the A/A control);
InfoBatch (Qin et al. 2024: prune rows with below-mean loss at random, rescale the kept ones' loss so the
expected gradient is unchanged) at the same budget; augmentation only (random selection + augmentation:
the "direct combination" of the abstract); density-only and consistency-only (ablations of the score); and
the method's selection without augmentation (selection only).

Randomness: the split and the label noise come from ``numpy_rng(seed, ...)`` streams; every method of a seed
starts from the same initial weights and batch-order seed, so methods are paired within a seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import train_test_split
from torch import nn

from flows.dynsel_aug.params import Params
from paperflows.core.seeding import global_rngs_isolated, numpy_rng, torch_generator, torch_seeded
from tasks.data import digits_pixels
from tasks.data_defects import with_label_noise
from tasks.selection import Policy, Selection, SelectionState, full_data, random_subset, train_with_selection
from tasks.train import torch_single_thread

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
N_CLASSES = 10
BACKGROUND = -1.0         # digits_pixels maps the blank background to -1
SCORE_FLOOR = 1e-6        # keeps every row drawable when a min-max-normalised score is exactly 0
SECOND_STREAM = 100_003   # train-seed offset of the A/A random run (another policy, batch and augmentation stream)


# ---------------------------------------------------------------- data

@dataclass(frozen=True)
class Split:
    """One seed's data: pool ``X_pool`` (n, 1, 8, 8) with true labels ``y_pool`` (n,); the clean reference split
    ``X_ref``/``y_ref`` that aligns the projection; the test split ``X_test``/``y_test`` (clean labels)."""
    X_pool: torch.Tensor
    y_pool: np.ndarray
    X_ref: torch.Tensor
    y_ref: np.ndarray
    X_test: torch.Tensor
    y_test: np.ndarray


def split_digits(p: Params, seed: int) -> Split:
    """Stratified pool / reference / test split of the 1,797 digits, one per seed."""
    X, y = digits_pixels()
    state = int(numpy_rng(seed, 0).integers(2**31))
    X_pool, X_rest, y_pool, y_rest = train_test_split(X, y, train_size=p.pool_frac, stratify=y, random_state=state)
    ref_share = p.reference_frac / (1.0 - p.pool_frac)
    X_ref, X_test, y_ref, y_test = train_test_split(X_rest, y_rest, train_size=ref_share, stratify=y_rest,
                                                    random_state=state)
    image = lambda a: torch.as_tensor(a, dtype=torch.float32).reshape(-1, 1, 8, 8)
    return Split(image(X_pool), y_pool, image(X_ref), y_ref, image(X_test), y_test)


# ---------------------------------------------------------------- model

class DigitCNN(nn.Module):
    """Two 3x3 conv layers (``channels``, 2·``channels``), a 2x2 max-pool, an FC layer of width ``hidden`` (the
    image embedding) and the linear classifier: (m, 1, 8, 8) -> logits (m, 10)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(2 * channels * 16, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


@torch.no_grad()
def embed(model: DigitCNN, X: torch.Tensor) -> torch.Tensor:
    """Penultimate features (m, hidden) of images ``X`` (m, 1, 8, 8)."""
    model.eval()
    return model.features(X)


@torch.no_grad()
def accuracy(model: nn.Module, X: torch.Tensor, y: np.ndarray) -> float:
    model.eval()
    return float((model(X).argmax(dim=1).numpy() == y).mean())


# ---------------------------------------------------------------- augmentation

def affine_augment(images: torch.Tensor, shifts: torch.Tensor, angles: torch.Tensor,
                   background: float = BACKGROUND) -> torch.Tensor:
    """Rotate each image (m, 1, H, W) by ``angles`` (m,) radians about its centre, then shift it by ``shifts``
    (m, 2) = (dx columns, dy rows) pixels; bilinear, the outside filled with ``background``.

    One batched ``grid_sample`` instead of a loop of ``scipy.ndimage`` calls (the test checks it against
    ``scipy.ndimage.affine_transform``). With ``align_corners=True`` the normalised grid spans pixel centres,
    so on a square image a pixel is 2/(W-1) normalised units on both axes and a rotation stays a rotation.
    """
    m, _, height, width = images.shape
    if height != width:
        raise ValueError("affine_augment expects square images")
    cos, sin = torch.cos(angles), torch.sin(angles)
    # grid_sample reads the input at theta @ (x_out, y_out, 1): the inverse map, R(-a) (out - s).
    inverse = torch.stack([torch.stack([cos, sin], 1), torch.stack([-sin, cos], 1)], 1)  # (m, 2, 2) = R(-a)
    offset = -(inverse @ (shifts * (2.0 / (width - 1)))[:, :, None])                        # (m, 2, 1)
    theta = torch.cat([inverse, offset], dim=2)
    grid = F.affine_grid(theta, list(images.shape), align_corners=True)
    moved = F.grid_sample(images - background, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    return moved + background


def make_augment(p: Params) -> Callable[[torch.Tensor, np.random.Generator], torch.Tensor]:
    """The loop's ``augment(batch, rng)``: a uniform shift in [-max_shift, max_shift]^2 pixels and a uniform
    rotation in [-max_rotation, max_rotation] degrees per image."""
    def augment(batch: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        m = len(batch)
        shifts = torch.as_tensor(rng.uniform(-p.max_shift, p.max_shift, size=(m, 2)), dtype=torch.float32)
        angles = torch.as_tensor(np.deg2rad(rng.uniform(-p.max_rotation, p.max_rotation, size=m)), dtype=torch.float32)
        return affine_augment(batch, shifts, angles)
    return augment


# ---------------------------------------------------------------- multimodal consistency (CLIP stand-in)

def class_prompts(p: Params) -> list[str]:
    return [p.text_template.format(name=name) for name in DIGIT_NAMES]


def align_projection(features: torch.Tensor, labels: np.ndarray, text: torch.Tensor, p: Params, seed: int) -> nn.Module:
    """An affine image->text map aligned CLIP-style on (image ``features`` (r, d), ``labels`` (r,)) pairs: full-batch
    Adam on the cross-entropy of cos(proj(h), text_k) / temperature over the K class prompts ``text`` (K, D),
    L2-normalised rows. Returns a module mapping features (m, d) to text space (m, D).

    The map's range is the K-dimensional span of the prompts (an orthonormal basis Q (D, K) from a QR
    decomposition): a direction outside that span lowers every class cosine by the same factor, i.e. only
    softens the softmax, so the constraint costs the alignment nothing and makes each step ~D/K times cheaper.
    """
    basis, _ = torch.linalg.qr(text.T.double())                      # (D, K), orthonormal columns spanning the prompts
    basis = basis.float()
    text_k = text @ basis                                            # (K, K): the prompts in that basis (norm 1)
    generator = torch_generator(seed)
    with global_rngs_isolated():   # the layer's own init is overwritten below: no draw may shift a seed's init
        linear = nn.Linear(features.shape[1], text.shape[0])
    with torch.no_grad():
        bound = 1.0 / np.sqrt(features.shape[1])
        linear.weight.copy_(torch.rand(linear.weight.shape, generator=generator) * 2 * bound - bound)
        linear.bias.zero_()
    # standardising the features makes the step size independent of their scale, which grows in training
    mean, scale = features.mean(0), features.std(0) + 1e-6
    inputs, target = (features - mean) / scale, torch.as_tensor(labels, dtype=torch.long)
    optimiser = torch.optim.Adam(linear.parameters(), lr=p.proj_lr)
    for _ in range(p.proj_steps):
        optimiser.zero_grad()
        logits = F.normalize(linear(inputs), dim=1) @ text_k.T / p.proj_temperature
        F.cross_entropy(logits, target).backward()
        optimiser.step()
    linear.requires_grad_(False)
    return _Projection(mean, scale, linear, basis)


class _Projection(nn.Module):
    """features (m, d) -> text space (m, D): standardise, the aligned linear map, then the prompts' basis."""

    def __init__(self, mean: torch.Tensor, scale: torch.Tensor, linear: nn.Linear, basis: torch.Tensor) -> None:
        super().__init__()
        self.mean, self.scale, self.linear, self.basis = mean, scale, linear, basis

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear((x - self.mean) / self.scale) @ self.basis.T


@torch.no_grad()
def consistency(projection: nn.Module, features: torch.Tensor, labels: np.ndarray, text: torch.Tensor) -> np.ndarray:
    """c_i = |cos(proj(h_i), text(y_i))| for features (n, d) and labels (n,): shape (n,)."""
    image = F.normalize(projection(features), dim=1)
    return (image * text[torch.as_tensor(labels, dtype=torch.long)]).sum(dim=1).abs().double().numpy()


@torch.no_grad()
def zero_shot_accuracy(projection: nn.Module, features: torch.Tensor, labels: np.ndarray, text: torch.Tensor) -> float:
    """Share of images whose projected embedding is closest (cosine) to their own class prompt."""
    predicted = (F.normalize(projection(features), dim=1) @ text.T).argmax(dim=1).numpy()
    return float((predicted == labels).mean())


# ---------------------------------------------------------------- selection policies

def minmax(values: np.ndarray) -> np.ndarray:
    """Min-max normalisation to [0, 1]; a constant vector maps to ones."""
    values = np.asarray(values, dtype=float)
    spread = values.max() - values.min()
    return np.ones_like(values) if spread == 0 else (values - values.min()) / spread


def joint_score(density: np.ndarray | None, consistency_scores: np.ndarray | None) -> np.ndarray:
    """p_rho * p_c (n,), each min-max normalised; a missing factor (an ablation) counts as 1."""
    present = [minmax(v) for v in (density, consistency_scores) if v is not None]
    if not present:
        raise ValueError("the joint score needs density, consistency or both")
    return np.prod(present, axis=0)


def select_per_class(scores: np.ndarray, labels: np.ndarray, fraction: float, rule: Literal["sample", "topk"],
                     rng: np.random.Generator) -> np.ndarray:
    """Sorted pool rows: from each class c, max(1, round(fraction·n_c)) rows, either drawn without replacement
    with probability proportional to ``scores`` (n,) ('sample'; successive draws, numpy's ``choice``) or the
    highest scores ('topk'; ties to the lower row)."""
    chosen = []
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        k = max(1, round(fraction * len(rows)))
        if rule == "topk":
            chosen.append(rows[np.argsort(-scores[rows], kind="stable")[:k]])
        else:
            weights = scores[rows] + SCORE_FLOOR
            chosen.append(rng.choice(rows, size=k, replace=False, p=weights / weights.sum()))
    return np.sort(np.concatenate(chosen))


def infobatch_selection(loss: np.ndarray, fraction: float, rng: np.random.Generator) -> Selection:
    """InfoBatch at an exact budget: of the n rows, n - round(fraction·n) are pruned uniformly among those with
    loss below the mean; the kept below-mean rows get loss weight |L| / (|L| - pruned), so the expected
    weighted loss (and gradient) equals the full-data one. If fewer than that many rows lie below the mean,
    all of them go and the lowest-loss others fill the quota, unweighted (InfoBatch's rescaling needs a
    kept share). InfoBatch's final full-data annealing epochs are left out to keep the budget equal."""
    n = len(loss)
    n_prune = n - round(fraction * n)
    low = np.flatnonzero(loss < loss.mean())
    weights = np.ones(n)
    if len(low) > n_prune:
        pruned = rng.choice(low, size=n_prune, replace=False)
        weights[low] = len(low) / (len(low) - n_prune)
    else:
        others = np.setdiff1d(np.arange(n), low)
        pruned = np.concatenate([low, others[np.argsort(loss[others], kind="stable")[:n_prune - len(low)]]])
    kept = np.setdiff1d(np.arange(n), pruned)
    return Selection(kept, weights=weights[kept])


@dataclass(frozen=True)
class Spec:
    """A method: its policy kind, the factors of the joint score, whether selected rows are augmented, and its
    random stream (1 = the A/A copy)."""
    kind: Literal["full", "random", "infobatch", "joint"]
    density: bool = False
    consistency: bool = False
    augment: bool = False
    stream: int = 0


METHODS: dict[str, Spec] = {
    "full": Spec("full"),
    "random": Spec("random"),
    "random_b": Spec("random", stream=1),
    "infobatch": Spec("infobatch"),
    "augment_only": Spec("random", augment=True),
    "density_only": Spec("joint", density=True, augment=True),
    "consistency_only": Spec("joint", consistency=True, augment=True),
    "selection_only": Spec("joint", density=True, consistency=True),
    "method": Spec("joint", density=True, consistency=True, augment=True),
}


class FeatureCache:
    """The loop's ``embed``: penultimate features of the pool, remembered for the joint policy, which scores
    consistency on the very features the loop's density was computed from (no extra pool pass)."""

    def __init__(self) -> None:
        self.features: torch.Tensor | None = None

    def __call__(self, model: DigitCNN, X: torch.Tensor) -> torch.Tensor:
        self.features = embed(model, X)
        return self.features


@dataclass
class JointPolicy:
    """The method's policy (and its ablations): score the pool, select per class, mark the selected rows for
    augmentation. ``reference_passes`` counts the forward-only passes over the reference split."""
    spec: Spec
    p: Params
    model: DigitCNN
    cache: FeatureCache
    labels: np.ndarray          # the pool's training labels (noisy in the noisy setting)
    X_ref: torch.Tensor
    y_ref: np.ndarray
    text: torch.Tensor
    seed: int
    reference_passes: int = 0

    def __call__(self, state: SelectionState) -> Selection:
        density = state.signals["density"].to_numpy() if self.spec.density else None
        scores_c = None
        if self.spec.consistency:
            ref_features = embed(self.model, self.X_ref)
            self.reference_passes += len(self.X_ref)
            projection = align_projection(ref_features, self.y_ref, self.text, self.p, seed=self.seed + state.epoch)
            scores_c = consistency(projection, self.cache.features, self.labels, self.text)
        rows = select_per_class(joint_score(density, scores_c), self.labels, self.p.fraction, self.p.selection_rule,
                                state.rng)
        return Selection(rows, augment=np.full(len(rows), self.spec.augment) if self.spec.augment else None)


def infobatch_policy(fraction: float) -> Policy:
    return lambda state: infobatch_selection(state.signals["loss"].to_numpy(), fraction, state.rng)


def augmenting(policy: Policy) -> Policy:
    """``policy`` with every selected row marked for augmentation (the loop augments only marked rows)."""
    def marked(state: SelectionState) -> Selection:
        selection = policy(state)
        return Selection(selection.indices, weights=selection.weights, augment=np.ones(len(selection.indices), bool))
    return marked


# ---------------------------------------------------------------- one run, one setting

def run_method(name: str, p: Params, split: Split, labels: np.ndarray, flipped: np.ndarray, text: torch.Tensor,
               seed: int) -> dict:
    """Train one method on the pool with training ``labels`` (n,) (``flipped`` (n,) marks the noisy ones) and
    return its test accuracy (%), budget and the share of flipped labels among the rows it trained on relative
    to the pool's noise rate (NaN without noise)."""
    spec = METHODS[name]
    started = time.thread_time()
    with torch_seeded(seed):
        model = DigitCNN(p.conv_channels, p.hidden)          # the same initial weights for every method
    cache = FeatureCache()
    joint = None
    if spec.kind == "full":
        policy = full_data()
    elif spec.kind == "random":
        policy = augmenting(random_subset(p.fraction)) if spec.augment else random_subset(p.fraction)
    elif spec.kind == "infobatch":
        policy = infobatch_policy(p.fraction)
    else:
        joint = JointPolicy(spec, p, model, cache, labels, split.X_ref, split.y_ref, text, seed)
        policy = joint
    run = train_with_selection(
        model, split.X_pool, torch.as_tensor(labels, dtype=torch.long), policy, epochs=p.epochs,
        reselect_every=p.reselect_every, batch_size=p.batch_size, lr=p.lr,
        seed=seed + (SECOND_STREAM if spec.stream else 0),
        embed=cache if spec.kind == "joint" else None,  # features (and their kNN density) only where a policy reads them
        augment=make_augment(p) if spec.augment else None, density_k=p.density_k)
    # share of flipped labels among the trained rows, over the selections, relative to the pool's noise rate
    noisy_share = (float(np.mean([flipped[s.indices].mean() for s in run.selections])) / flipped.mean()
                   if flipped.any() else float("nan"))
    row = {"method": name, "accuracy": 100.0 * accuracy(model, split.X_test, split.y_test),  # percent
           "samples_seen": run.budget.samples_seen, "signal_passes": run.budget.signal_passes,
           "reference_passes": 0 if joint is None else joint.reference_passes,
           "noisy_share": noisy_share, "zero_shot": float("nan")}
    if name == "method":
        # the stand-in's own check: does the aligned projection classify held-out digits through the prompts?
        projection = align_projection(embed(model, split.X_ref), split.y_ref, text, p, seed=seed + p.epochs)
        row["zero_shot"] = 100.0 * zero_shot_accuracy(projection, embed(model, split.X_test), split.y_test, text)
    row["cpu_s"] = time.thread_time() - started
    return row


def run_setting(p: Params, seed: int, noise: float, text: np.ndarray) -> list[dict]:
    """Every method of :data:`METHODS` on one seed's split at label-noise rate ``noise``; ``text`` (10, D) are
    the class-prompt embeddings (computed once per run)."""
    split = split_digits(p, seed)
    if noise > 0:
        labels, flipped = with_label_noise(split.y_pool, noise, N_CLASSES, numpy_rng(seed, 1))
    else:
        labels, flipped = split.y_pool.copy(), np.zeros(len(split.y_pool), dtype=bool)
    text_t = torch.as_tensor(text, dtype=torch.float32)
    with torch_single_thread():
        rows = [run_method(name, p, split, labels, flipped, text_t, seed) for name in METHODS]
    return [{"seed": seed, "noise": noise, "pool": len(labels), **row} for row in rows]
