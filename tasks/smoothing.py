"""Randomized smoothing (Cohen, Rosenfeld and Kolter, 2019): Monte-Carlo class counts under Gaussian
noise, ``predict`` (binomial test, abstain) and ``certify`` (Clopper-Pearson lower bound, L2 radius).

The smoothed classifier is ``g(x) = argmax_c P(f(x + e) = c)``, ``e ~ N(0, sigma^2 I)``. If the top
class has probability at least ``p_A > 1/2``, ``g`` is constant within the L2 radius ``sigma Phi^-1(p_A)``.

Shapes: ``x`` is ``(m, ...)`` (m points, any input shape); ``model`` maps ``(b, ...)`` to logits
``(b, K)``; counts are ``(m, K)`` integer arrays; predictions and radii are ``(m,)``. Abstention is
``ABSTAIN = -1``.

The one-sided Clopper-Pearson bounds are exposed on their own (:func:`cp_lower`, :func:`cp_upper`)
so that variants (e.g. a cost-sensitive certificate with Bonferroni-corrected upper bounds) compose
them; :func:`certify_from_counts` is the certificate as a pure function of counts. Why not a library:
no maintained PyPI package implements Cohen's certify for arbitrary torch models on CPU without a
pinned torchvision; the statistics come from statsmodels and scipy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.stats import binom, norm
from statsmodels.stats.proportion import proportion_confint

from paperflows.core.seeding import torch_generator

ABSTAIN = -1
Model = Callable[[torch.Tensor], torch.Tensor]


def cp_lower(successes: np.ndarray | int, trials: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson lower bound on a binomial proportion, elementwise
    (the lower end of the two-sided 1 - 2 alpha interval; 0 when ``successes == 0``)."""
    return np.asarray(proportion_confint(np.asarray(successes), np.asarray(trials), alpha=2 * alpha,
                                         method="beta")[0], dtype=float)


def cp_upper(successes: np.ndarray | int, trials: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial proportion, elementwise
    (1 when ``successes == trials``)."""
    return np.asarray(proportion_confint(np.asarray(successes), np.asarray(trials), alpha=2 * alpha,
                                         method="beta")[1], dtype=float)


def sample_counts(model: Model, x: torch.Tensor, sigma: float, n: int, batch_size: int = 10_000,
                  seed: int = 0) -> np.ndarray:
    """Counts of ``argmax f(x_i + e)`` over ``n`` draws ``e ~ N(0, sigma^2 I)`` per point.

    ``x``: (m, ...). Returns (m, K) int64. Points are processed in chunks of ``batch_size`` noisy rows
    (whole points per chunk, at least one), with noise from one generator seeded by ``seed``.
    """
    (counts,) = sample_counts_shared(lambda noisy: [model(noisy)], x, sigma, n, batch_size, seed)
    return counts


@torch.no_grad()
def sample_counts_shared(classify: Callable[[torch.Tensor], list[torch.Tensor]], x: torch.Tensor, sigma: float,
                         n: int, batch_size: int = 10_000, seed: int = 0) -> list[np.ndarray]:
    """:func:`sample_counts` of several models on the same noise: ``classify`` maps a noisy batch to one
    logits tensor per model. Each model's counts equal its own :func:`sample_counts` with the same
    ``seed``; the noise is drawn once for all (and ``classify`` may share work between models)."""
    if n < 1 or sigma <= 0:
        raise ValueError(f"need n >= 1 and sigma > 0, got n={n}, sigma={sigma}")
    generator = torch_generator(seed)
    x = x.detach()
    m = len(x)
    counts = [np.zeros((m, logits.shape[1]), dtype=np.int64) for logits in classify(x[:1])]
    points_per_chunk = max(1, batch_size // n)
    for start in range(0, m, points_per_chunk):
        block = x[start:start + points_per_chunk]
        b = len(block)
        # draws of one point are in chunks too, so a huge n never builds one huge batch
        for drawn in range(0, n, max(1, batch_size)):
            k = min(batch_size, n - drawn)
            noisy = block.unsqueeze(1).expand(b, k, *block.shape[1:]).reshape(b * k, *block.shape[1:])
            noisy = noisy + sigma * torch.randn(noisy.shape, generator=generator, dtype=noisy.dtype)
            for model_counts, logits in zip(counts, classify(noisy)):
                labels = logits.argmax(dim=1).view(b, k)
                model_counts[start:start + b] += torch.nn.functional.one_hot(labels, logits.shape[1]).sum(dim=1).numpy()
    return counts


def binomial_abstain(top: np.ndarray, second: np.ndarray, alpha: float) -> np.ndarray:
    """Cohen's PREDICT test: abstain where the two-sided binomial test of ``top`` successes out of
    ``top + second`` against p = 1/2 has p-value > ``alpha``. Shapes (m,) -> bool (m,)."""
    top, second = np.asarray(top), np.asarray(second)
    total = top + second
    p_value = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(top, second), total, 0.5))
    return np.where(total == 0, True, p_value > alpha)


def predict(model: Model, x: torch.Tensor, sigma: float, n: int, alpha: float, batch_size: int = 10_000,
            seed: int = 0) -> np.ndarray:
    """Cohen's PREDICT: the top class of ``n`` noisy votes, or ``ABSTAIN`` when a binomial test
    cannot separate it from the runner-up at level ``alpha``. Returns (m,) int; with probability at
    most ``alpha`` (per point) the returned class differs from the smoothed classifier's ``g(x)``."""
    counts = sample_counts(model, x, sigma, n, batch_size, seed)
    order = np.argsort(-counts, axis=1, kind="stable")
    top, second = order[:, 0], order[:, 1]
    rows = np.arange(len(counts))
    abstain = binomial_abstain(counts[rows, top], counts[rows, second], alpha)
    return np.where(abstain, ABSTAIN, top)


@dataclass(frozen=True)
class Certificate:
    """Output of :func:`certify` for m points: ``prediction`` (m,) (``ABSTAIN`` = -1), ``radius`` (m,)
    (0 where abstaining), ``top_class`` (m,) (the guess from the selection draws, also where abstaining),
    ``p_lower`` (m,) (the Clopper-Pearson lower bound on its probability) and ``counts`` (m, K) (the
    estimation draws, for certificates that reuse them)."""

    prediction: np.ndarray
    radius: np.ndarray
    top_class: np.ndarray
    p_lower: np.ndarray
    counts: np.ndarray


def certify_from_counts(selection: np.ndarray, estimation: np.ndarray, sigma: float, alpha: float) -> Certificate:
    """Cohen's CERTIFY from its two independent count arrays (each (m, K)): the top class of the
    ``selection`` draws, its (1 - alpha) lower bound ``p_A`` from the ``estimation`` draws, the radius
    ``sigma Phi^-1(p_A)``, and abstention where ``p_A < 1/2``."""
    top = selection.argmax(axis=1)
    n = estimation.sum(axis=1)
    p_lower = cp_lower(estimation[np.arange(len(top)), top], n, alpha)
    abstain = p_lower < 0.5
    radius = np.where(abstain, 0.0, sigma * norm.ppf(np.clip(p_lower, 0.5, 1.0)))
    return Certificate(prediction=np.where(abstain, ABSTAIN, top), radius=radius, top_class=top,
                       p_lower=p_lower, counts=estimation)


def certify(model: Model, x: torch.Tensor, sigma: float, n0: int, n: int, alpha: float,
            batch_size: int = 10_000, seed: int = 0) -> Certificate:
    """Cohen's CERTIFY: ``n0`` selection draws pick the top class, ``n`` fresh draws bound its
    probability. With probability at least 1 - alpha (per point), a non-abstained prediction equals
    ``g(x)`` and ``g`` is constant on the L2 ball of the returned radius. ``x``: (m, ...)."""
    selection = sample_counts(model, x, sigma, n0, batch_size, seed)
    estimation = sample_counts(model, x, sigma, n, batch_size, seed + 1_000_003)
    return certify_from_counts(selection, estimation, sigma, alpha)
