"""White-box attacks: FGSM and PGD under an L-infinity or L2 budget, batched, with random restarts.

The attacks maximise any per-sample objective, so one implementation serves a classifier's
cross-entropy, a margin, a smoothed classifier's loss or a contrastive alignment loss. Why not
``torchattacks``: it pulls torchvision (pinned to one torch build) for what is forty lines here, and it
only attacks classifiers.

Shapes: ``x`` is ``(n, ...)``; the objective maps ``(n, ...)`` to ``(n,)`` per-sample losses.
"""

from __future__ import annotations

from typing import Callable, Literal

import torch
from torch.nn import functional as F

from paperflows.core.seeding import torch_generator

Objective = Callable[[torch.Tensor], torch.Tensor]
Norm = Literal["linf", "l2"]


def _flat_norm(t: torch.Tensor) -> torch.Tensor:
    """Per-sample L2 norm, shaped to broadcast against ``t``: ``(n, 1, ..., 1)``."""
    return t.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (t.dim() - 1)))


def project(delta: torch.Tensor, eps: float, norm: Norm) -> torch.Tensor:
    """The closest perturbation to ``delta`` (per sample) inside the ``eps``-ball of ``norm``."""
    if norm == "linf":
        return delta.clamp(-eps, eps)
    return delta * (eps / _flat_norm(delta)).clamp(max=1.0)


def _ascent_direction(grad: torch.Tensor, norm: Norm) -> torch.Tensor:
    """The steepest-ascent unit step for ``norm``: the gradient's sign (L-inf) or its direction (L2)."""
    return grad.sign() if norm == "linf" else grad / _flat_norm(grad)


def _random_start(x: torch.Tensor, eps: float, norm: Norm, generator: torch.Generator) -> torch.Tensor:
    """A uniform point of the L-inf ball, or a uniform point of the L2 ball (direction times radius)."""
    if norm == "linf":
        return (torch.rand(x.shape, generator=generator) * 2 - 1) * eps
    direction = torch.randn(x.shape, generator=generator)
    n_dims = x[0].numel()
    radius = eps * torch.rand(len(x), generator=generator) ** (1.0 / n_dims)
    return direction / _flat_norm(direction) * radius.view(-1, *([1] * (x.dim() - 1)))


def pgd(objective: Objective, x: torch.Tensor, *, eps: float, step_size: float, steps: int, norm: Norm = "linf",
        restarts: int = 1, random_start: bool = True, bounds: tuple[float, float] | None = (0.0, 1.0),
        seed: int = 0) -> torch.Tensor:
    """Projected gradient ascent on ``objective`` within ``eps`` of ``x`` (Madry et al., 2018).

    Each restart starts from a random point of the ball (or from ``x`` when ``random_start`` is
    false), takes ``steps`` steps of length ``step_size`` and projects back onto the ball and the
    pixel ``bounds``. Per sample, the restart with the highest final objective wins. Returns the
    adversarial inputs, shape of ``x``, detached.
    """
    if eps < 0 or step_size <= 0 or steps < 1 or restarts < 1:
        raise ValueError(f"need eps >= 0, step_size > 0, steps >= 1, restarts >= 1; got {eps}, {step_size}, {steps}, {restarts}")
    generator = torch_generator(seed)
    x = x.detach()
    best = x.clone()
    best_loss = torch.full((len(x),), -torch.inf)
    for _ in range(restarts):
        delta = _random_start(x, eps, norm, generator) if random_start else torch.zeros_like(x)
        for _ in range(steps):
            delta.requires_grad_(True)
            adversarial = x + delta if bounds is None else (x + delta).clamp(*bounds)
            grad, = torch.autograd.grad(objective(adversarial).sum(), delta)
            delta = project(delta.detach() + step_size * _ascent_direction(grad, norm), eps, norm)
        adversarial = x + delta if bounds is None else (x + delta).clamp(*bounds)
        with torch.no_grad():
            loss = objective(adversarial)
        improved = loss > best_loss
        best[improved] = adversarial[improved]
        best_loss = torch.where(improved, loss, best_loss)
    return best


def fgsm(objective: Objective, x: torch.Tensor, *, eps: float, norm: Norm = "linf",
         bounds: tuple[float, float] | None = (0.0, 1.0)) -> torch.Tensor:
    """The fast gradient sign method (Goodfellow et al., 2015): one full-length step from ``x``."""
    return pgd(objective, x, eps=eps, step_size=eps, steps=1, norm=norm, random_start=False, bounds=bounds)


def cross_entropy_objective(model: Callable[[torch.Tensor], torch.Tensor], labels: torch.Tensor,
                            targeted: bool = False) -> Objective:
    """Per-sample cross-entropy of ``model`` at ``labels`` (shape ``(n,)``); negated when ``targeted``,
    so that maximising it moves the prediction toward the target labels."""
    sign = -1.0 if targeted else 1.0
    return lambda inputs: sign * F.cross_entropy(model(inputs), labels, reduction="none")


def margin_objective(model: Callable[[torch.Tensor], torch.Tensor], labels: torch.Tensor) -> Objective:
    """Per-sample ``max_{j != y} z_j - z_y``: positive exactly where the prediction is wrong (the C&W margin)."""
    def objective(inputs: torch.Tensor) -> torch.Tensor:
        logits = model(inputs)
        true = logits.gather(1, labels[:, None]).squeeze(1)
        others = logits.scatter(1, labels[:, None], -torch.inf)
        return others.max(dim=1).values - true
    return objective


@torch.no_grad()
def robust_accuracy(model: Callable[[torch.Tensor], torch.Tensor], adversarial: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy of ``model`` on ``adversarial`` inputs against the clean ``labels``."""
    return float((model(adversarial).argmax(dim=1) == labels).float().mean())
