"""Ranked from Within (Tu et al., ICML 2025): rank models on unlabeled target data by label-free signals
from their own softmax outputs, and score each signal by the rank correlation (Spearman rho, Kendall tau)
between the models' mean signal and their true accuracy on that target.

The paper ranks 47 LMMs on 9 VQA benchmarks. Here the "LMMs" are a zoo of small digit classifiers trained
on the fly (logistic regression, MLPs, a small CNN, a kNN with a softmax over class distances; differing in
capacity, epochs, label noise and training data), and the "benchmarks" are unlabeled target domains built
from the held-out digits (clean, noise, rotation, blur, occlusion, inversion, shift). Temperatures are left
untuned, as for deployed models.

Read top to bottom:

1. data: the digits as 8x8 ink images, the per-seed split (train / labeled clean proxy / unlabeled target
   pool) and the target domains;
2. the zoo: one interface, ``Member.logits(images) -> (n, 10)``, for every family;
3. the label-free signals (a model's score on a target: higher = predicted more accurate):
   NLL of the predicted answer, max softmax, entropy, margin (the softmax signals), sampling-based
   self-consistency, test-time-augmentation agreement; the paper's comparator ranks by accuracy on a
   labeled *other* benchmark (the clean proxy set); the negative control is the NLL score with the model
   identities permuted;
4. one seed: train the zoo, score every (signal, target) by rho and tau against the true accuracies.

Library choices: scikit-learn's ``LogisticRegression`` (lbfgs, multinomial) for the linear members,
``tasks.train`` (Adam, seeded batches) for the torch members, ``scipy.stats`` for Spearman and Kendall,
``scipy.ndimage`` for the rotation. No Prefect; randomness only through the seeds passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy import ndimage
from scipy import stats as sps
from sklearn.linear_model import LogisticRegression
from torch import nn

from flows.lmm_rank_unsup.params import ModelSpec, Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.data import digits_pixels
from tasks.federated import shift_digits
from tasks.train import mlp, torch_single_thread, train

INK = 16.0  # a digits pixel holds 0..16 units of ink
N_CLASSES = 10
SOFTMAX_SIGNALS = ("nll", "max_softmax", "entropy", "margin")
SIGNALS = (*SOFTMAX_SIGNALS, "self_consistency", "tta_agreement")
BASELINE = "proxy_accuracy"
CONTROL = "nll_permuted"
RANKERS = (*SIGNALS, BASELINE, CONTROL)


# --- 1. data -----------------------------------------------------------------------------------------

def digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 scikit-learn digits as ink images (1797, 8, 8) in [0, 16] and their labels (1797,)."""
    pixels, labels = digits_pixels()
    return ((pixels + 1.0) * 8.0).reshape(-1, 8, 8), labels


@dataclass(frozen=True)
class Split:
    """One seed's stratified split: ``train_*`` (the zoo's training data), ``proxy_*`` (a labeled clean set,
    the baseline's 'other benchmark') and ``target_*`` (the pool the unlabeled targets are built from).
    Images (n, 8, 8), labels (n,)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    proxy_images: np.ndarray
    proxy_labels: np.ndarray
    target_images: np.ndarray
    target_labels: np.ndarray


def split_digits(images: np.ndarray, labels: np.ndarray, p: Params, rng: np.random.Generator) -> Split:
    """Split every class in the proportions ``target_share`` / ``proxy_share`` / rest (train)."""
    parts: dict[str, list[np.ndarray]] = {"train": [], "proxy": [], "target": []}
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_target, n_proxy = round(p.target_share * len(idx)), round(p.proxy_share * len(idx))
        parts["target"].append(idx[:n_target])
        parts["proxy"].append(idx[n_target:n_target + n_proxy])
        parts["train"].append(idx[n_target + n_proxy:])
    idx = {name: np.sort(np.concatenate(chunks)) for name, chunks in parts.items()}
    return Split(images[idx["train"]], labels[idx["train"]], images[idx["proxy"]], labels[idx["proxy"]],
                 images[idx["target"]], labels[idx["target"]])


def rotate(images: np.ndarray, max_degrees: float, rng: np.random.Generator) -> np.ndarray:
    """Each image (n, 8, 8) rotated about its centre by an angle uniform in +-max_degrees (bilinear, zero fill)."""
    angles = rng.uniform(-max_degrees, max_degrees, len(images))
    out = np.stack([ndimage.rotate(img, a, reshape=False, order=1, mode="constant", cval=0.0)
                    for img, a in zip(images, angles)])
    return np.clip(out, 0.0, INK)


def occlude(images: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Each image (n, 8, 8) with one random size x size square of pixels blanked (ink 0)."""
    n = len(images)
    top, left = rng.integers(0, 8 - size + 1, n), rng.integers(0, 8 - size + 1, n)
    grid = np.arange(8)
    rows = (grid[None, :] >= top[:, None]) & (grid[None, :] < top[:, None] + size)
    cols = (grid[None, :] >= left[:, None]) & (grid[None, :] < left[:, None] + size)
    return np.where(rows[:, :, None] & cols[:, None, :], 0.0, images)


def shift_one_pixel(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each image (n, 8, 8) moved by one pixel up, down, left or right (at random), zero fill."""
    out = np.zeros_like(images)
    direction = rng.integers(0, 4, len(images))
    out[direction == 0, :-1, :] = images[direction == 0, 1:, :]   # up
    out[direction == 1, 1:, :] = images[direction == 1, :-1, :]   # down
    out[direction == 2, :, :-1] = images[direction == 2, :, 1:]   # left
    out[direction == 3, :, 1:] = images[direction == 3, :, :-1]   # right
    return out


def add_noise(images: np.ndarray, std: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian pixel noise of ``std`` x the ink range, clipped to [0, 16] (``tasks.federated.shift_digits``)."""
    return shift_digits(images, "noise", rng, strength=std * INK / 2.0)  # shift_digits' noise std is 2 x strength


def make_target(kind: str, images: np.ndarray, p: Params, rng: np.random.Generator) -> np.ndarray:
    """The unlabeled target domain ``kind`` (one of ``params.TARGETS``) built from ``images`` (n, 8, 8);
    the labels stay those of the pool. ``noise_s``: Gaussian noise of std s x the ink range."""
    if kind == "clean":
        return images.copy()
    if kind.startswith("noise_"):
        return add_noise(images, float(kind.removeprefix("noise_")), rng)
    if kind == "rotate":
        return rotate(images, p.rotate_degrees, rng)
    if kind in ("blur", "invert"):
        return shift_digits(images, kind, rng)
    if kind == "occlude":
        return occlude(images, p.occlusion_size, rng)
    if kind == "shift_1px_noise":
        return add_noise(shift_one_pixel(images, rng), p.shift_noise, rng)
    raise ValueError(f"unknown target '{kind}'")


def as_features(images: np.ndarray) -> np.ndarray:
    """Ink images (n, 8, 8) -> float pixels in [-1, 1] (n, 64), the scaling of ``tasks.data.digits_pixels``."""
    return images.reshape(len(images), 64) / 8.0 - 1.0


# --- 2. the zoo --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Member:
    """A trained zoo member behind the one interface every signal uses: ``logits(images (n, 8, 8)) -> (n, 10)``."""

    spec: ModelSpec
    logits: Callable[[np.ndarray], np.ndarray]


class SmallCNN(nn.Module):
    """conv3x3(1 -> w) - ReLU - conv3x3(w -> 2w) - ReLU - maxpool 2 - linear(2w * 4 * 4 -> 10), on (n, 1, 8, 8)."""

    def __init__(self, width: int):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 2 * width, 3, padding=1),
                                 nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2 * width * 16, N_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.view(-1, 1, 8, 8))


def corrupt_labels(labels: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Replace a ``rate`` share of ``labels`` (n,) by a uniformly drawn *other* class."""
    out = labels.copy()
    flip = rng.random(len(labels)) < rate
    out[flip] = (labels[flip] + rng.integers(1, N_CLASSES, flip.sum())) % N_CLASSES
    return out


def knn_class_logits(train_x: np.ndarray, train_y: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """kNN with a softmax over distances: logit_c = -(mean Euclidean distance from x to its k nearest training
    points of class c), temperature 1 (untuned). Shapes (m, 64), (m,), (n, 64) -> (n, 10)."""
    squared = (x ** 2).sum(axis=1)[:, None] + (train_x ** 2).sum(axis=1)[None, :] - 2.0 * x @ train_x.T  # a GEMM, not cdist's loop
    distances = np.sqrt(np.clip(squared, 0.0, None))
    logits = np.empty((len(x), N_CLASSES))
    for c in range(N_CLASSES):
        own = distances[:, train_y == c]
        kc = min(k, own.shape[1])
        logits[:, c] = -np.partition(own, kc - 1, axis=1)[:, :kc].mean(axis=1)
    return logits


def train_member(spec: ModelSpec, split: Split, p: Params, seed: int) -> Member:
    """Train one zoo member on its share of the training split, with its label noise; ``seed`` fixes the
    subset, the corrupted labels, the initialisation and the batches."""
    rng = numpy_rng(seed)
    keep = np.sort(rng.permutation(len(split.train_labels))[:max(N_CLASSES, round(spec.train_fraction * len(split.train_labels)))])
    x, y = as_features(split.train_images[keep]), corrupt_labels(split.train_labels[keep], spec.label_noise, rng)
    if spec.family == "logreg":
        model = LogisticRegression(C=spec.inverse_l2, max_iter=2000).fit(x, y)
        return Member(spec, lambda images: model.decision_function(as_features(images)))
    if spec.family == "knn":
        return Member(spec, lambda images: knn_class_logits(x, y, as_features(images), spec.neighbours))
    with torch_seeded(seed):
        net = mlp(64, list(spec.hidden), N_CLASSES) if spec.family == "mlp" else SmallCNN(spec.hidden[0])
    train(net, torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y), loss_fn=nn.functional.cross_entropy,
          epochs=spec.epochs, batch_size=p.batch_size, lr=p.learning_rate, seed=seed)
    net.eval()

    def logits(images: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(as_features(images), dtype=torch.float32)).double().numpy()

    return Member(spec, logits)


# --- 3. label-free signals ---------------------------------------------------------------------------

def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (n, C) logits at temperature 1."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def softmax_signals(probs: np.ndarray) -> dict[str, float]:
    """The softmax signals of one model on one target, from its probabilities (n, C), as mean scores
    (higher = more confident): mean log-prob of the predicted answer (= minus its NLL), mean max
    probability, minus mean entropy, mean margin between the top two probabilities."""
    top2 = np.sort(probs, axis=1)[:, -2:]
    entropy = -(probs * np.log(np.clip(probs, 1e-300, None))).sum(axis=1)
    return {"nll": float(np.log(np.clip(top2[:, 1], 1e-300, None)).mean()), "max_softmax": float(top2[:, 1].mean()),
            "entropy": float(-entropy.mean()), "margin": float((top2[:, 1] - top2[:, 0]).mean())}


def self_consistency(probs: np.ndarray, n_samples: int, rng: np.random.Generator) -> float:
    """Sampling-based self-consistency: draw ``n_samples`` answers per input from its softmax (n, C) and
    return the mean share of the most frequent answer (1 = always the same answer)."""
    cdf = np.cumsum(probs, axis=1)
    draws = (rng.random((len(probs), n_samples, 1)) > cdf[:, None, :-1]).sum(axis=2)  # (n, K) sampled classes
    counts = np.zeros((len(probs), probs.shape[1]), dtype=int)
    np.add.at(counts, (np.repeat(np.arange(len(probs)), n_samples), draws.ravel()), 1)
    return float(counts.max(axis=1).mean() / n_samples)


def tta_agreement(member: Member, images: np.ndarray, predicted: np.ndarray, p: Params,
                  rng: np.random.Generator) -> float:
    """Test-time-augmentation agreement: the mean share of ``p.tta_samples`` noisy copies of each image
    (n, 8, 8) whose predicted class equals the prediction on the image itself (n,)."""
    copies = add_noise(np.repeat(images[None], p.tta_samples, axis=0).reshape(-1, 8, 8), p.tta_noise, rng)
    return float((member.logits(copies).argmax(axis=1).reshape(p.tta_samples, -1) == predicted[None]).mean())


def rank_correlation(scores: np.ndarray, accuracy: np.ndarray) -> tuple[float, float]:
    """Spearman rho and Kendall tau-b between the models' scores and true accuracies (both (n_models,));
    NaN where either side is constant."""
    if np.ptp(scores) == 0 or np.ptp(accuracy) == 0:
        return float("nan"), float("nan")
    return float(sps.spearmanr(scores, accuracy).statistic), float(sps.kendalltau(scores, accuracy).statistic)


# --- 4. one seed ---------------------------------------------------------------------------------------

def run_seed(p: Params, seed: int) -> dict:
    """Train the zoo on this seed's split, build every target, and score every ranker on every target.

    Returns ``{"seed", "models": [{target, model, family, accuracy, <signal>...}] (one row per model and
    target), "rho": {ranker: {target: rho}}, "tau": {ranker: {target: tau}}}``, rankers as in ``RANKERS``.
    """
    images, labels = digit_images()
    split = split_digits(images, labels, p, numpy_rng(seed, 0))
    with torch_single_thread():  # the seeds are the parallelism; one thread also fixes the reduction order
        return score_zoo(p, seed, split, [train_member(spec, split, p, seed=1000 * seed + i) for i, spec in enumerate(p.zoo)])


def score_zoo(p: Params, seed: int, split: Split, zoo: list[Member]) -> dict:
    """The rows, rho and tau of :func:`run_seed` for a trained ``zoo``."""
    proxy_accuracy = np.array([(m.logits(split.proxy_images).argmax(axis=1) == split.proxy_labels).mean() for m in zoo])
    rows, rho, tau = [], {r: {} for r in RANKERS}, {r: {} for r in RANKERS}
    for t, kind in enumerate(p.targets):
        target = make_target(kind, split.target_images, p, numpy_rng(seed, 1, t))
        signal_rng = numpy_rng(seed, 2, t)
        scores = {s: np.empty(len(zoo)) for s in SIGNALS}
        accuracy = np.empty(len(zoo))
        for i, member in enumerate(zoo):
            logits = member.logits(target)
            probs, predicted = softmax(logits), logits.argmax(axis=1)
            accuracy[i] = (predicted == split.target_labels).mean()
            signals = {**softmax_signals(probs), "self_consistency": self_consistency(probs, p.consistency_samples, signal_rng),
                       "tta_agreement": tta_agreement(member, target, predicted, p, signal_rng)}
            for s in SIGNALS:
                scores[s][i] = signals[s]
            rows.append({"seed": seed, "target": kind, "model": member.spec.name, "family": member.spec.family,
                         "accuracy": accuracy[i], "proxy_accuracy": proxy_accuracy[i], **signals})
        scores[BASELINE] = proxy_accuracy
        scores[CONTROL] = scores["nll"][signal_rng.permutation(len(zoo))]
        for r in RANKERS:
            rho[r][kind], tau[r][kind] = rank_correlation(scores[r], accuracy)
    return {"seed": seed, "models": rows, "rho": rho, "tau": tau}
