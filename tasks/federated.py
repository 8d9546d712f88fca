"""Federated learning on one machine: silos cut from a dataset (label, quantity and feature shift), and FedAvg.

FedAvg (McMahan et al., 2017): every round, each participating silo trains a copy of the global model on its own
data, and the server replaces the global weights by the size-weighted average of the copies. ``keep_local``
names parameters that never leave a silo (personalised layers, per-silo codebooks); FedProx (Li et al., 2020)
adds ``mu/2 · ||w - w_global||²`` to each local loss.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

import numpy as np
import torch
from scipy import ndimage
from torch import nn
from torch.nn import functional as F

from paperflows.core.seeding import numpy_rng, torch_seeded

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
DIGIT_SHIFTS = ("none", "rotate", "invert", "blur", "noise")


def never(name: str) -> bool:
    return False


def partition(y: np.ndarray, n_silos: int, rng: np.random.Generator, *, label_alpha: float | None = None,
              quantity_alpha: float | None = None, min_size: int = 1, max_tries: int = 100) -> list[np.ndarray]:
    """Split the rows of ``y`` (n,) into ``n_silos`` disjoint index arrays that cover every row.

    ``label_alpha``: label skew, each class's rows spread over the silos in Dirichlet(``label_alpha``) shares
    (small = each silo sees few classes). ``quantity_alpha``: quantity skew, silo sizes in Dirichlet shares.
    Neither: an iid split into equal sizes. Draws are repeated until every silo has ``min_size`` rows.
    """
    y = np.asarray(y)
    if n_silos < 1 or n_silos * min_size > len(y):
        raise ValueError(f"cannot cut {len(y)} rows into {n_silos} silos of at least {min_size}")
    if label_alpha is not None and quantity_alpha is not None:
        raise ValueError("choose label_alpha or quantity_alpha, not both")
    for _ in range(max_tries):
        if label_alpha is not None:
            silos: list[list[int]] = [[] for _ in range(n_silos)]
            for c in np.unique(y):
                rows = rng.permutation(np.flatnonzero(y == c))
                cuts = (np.cumsum(rng.dirichlet(np.full(n_silos, label_alpha)))[:-1] * len(rows)).astype(int)
                for silo, part in zip(silos, np.split(rows, cuts)):
                    silo.extend(part.tolist())
            parts = [np.sort(np.array(s, dtype=int)) for s in silos]
        else:
            shares = rng.dirichlet(np.full(n_silos, quantity_alpha)) if quantity_alpha is not None else np.full(n_silos, 1 / n_silos)
            cuts = np.round(np.cumsum(shares)[:-1] * len(y)).astype(int)
            parts = [np.sort(p) for p in np.split(rng.permutation(len(y)), cuts)]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"no draw in {max_tries} gave every silo {min_size} rows; raise the alpha or lower min_size")


def shift_digits(images: np.ndarray, kind: str, rng: np.random.Generator, strength: float = 1.0) -> np.ndarray:
    """A feature shift of 8x8 digit images (n, 8, 8), ink in [0, 16]; returns a new array of the same shape.

    ``rotate``: 90° counter-clockwise; ``invert``: 16 - x; ``blur``: a 3x3 box filter blended in by ``strength``;
    ``noise``: Gaussian noise of std ``2·strength``, clipped to [0, 16]; ``none``: a copy.
    """
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3 or images.shape[1:] != (8, 8):
        raise ValueError(f"expected images of shape (n, 8, 8), got {images.shape}")
    if kind == "none":
        return images.copy()
    if kind == "rotate":
        return np.rot90(images, k=1, axes=(1, 2)).copy()
    if kind == "invert":
        return 16.0 - images
    if kind == "blur":
        blurred = ndimage.uniform_filter(images, size=(1, 3, 3), mode="constant")
        return (1 - strength) * images + strength * blurred
    if kind == "noise":
        return np.clip(images + 2.0 * strength * rng.standard_normal(images.shape), 0.0, 16.0)
    raise ValueError(f"unknown digit shift '{kind}'; choose one of {', '.join(DIGIT_SHIFTS)}")


@dataclass
class Silo:
    """One client's data: training and test rows, and which source distribution it was drawn from."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    distribution: int = 0


def cross_entropy(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(xb), yb)


def local_train(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, epochs: int, batch_size: int, lr: float,
                rng: np.random.Generator, optimizer: Literal["sgd", "adam"] = "sgd", loss_fn: LossFn = cross_entropy,
                proximal_mu: float = 0.0, anchor: dict[str, torch.Tensor] | None = None,
                uses_global_rng: bool = False) -> int:
    """Train ``model`` in place on one silo's ``(X, y)`` (n, ...) and (n,); returns the samples processed.

    Mini-batch order comes from ``rng``. ``proximal_mu > 0`` adds FedProx's ``mu/2 · ||w - anchor||²`` over the
    parameters named in ``anchor``. ``uses_global_rng``: the model draws from torch's global generator in
    training (dropout, noisy gates), so training holds the global-RNG lock with a seed from ``rng``; that keeps
    concurrent seeds reproducible at the price of running them one at a time.
    """
    if proximal_mu > 0 and anchor is None:
        raise ValueError("FedProx (proximal_mu > 0) needs the anchor weights")
    params = dict(model.named_parameters())
    make = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    optimiser = make(model.parameters(), lr=lr)
    seed = int(rng.integers(2**31))
    seen = 0
    with torch_seeded(seed) if uses_global_rng else contextlib.nullcontext():
        model.train()
        for _ in range(epochs):
            order = torch.from_numpy(rng.permutation(len(X)))
            for start in range(0, len(X), batch_size):
                idx = order[start:start + batch_size]
                optimiser.zero_grad()
                loss = loss_fn(model, X[idx], y[idx])
                if proximal_mu > 0:
                    loss = loss + proximal_mu / 2 * sum(((params[k] - w) ** 2).sum() for k, w in anchor.items())
                loss.backward()
                optimiser.step()
                seen += len(idx)
        model.eval()
    return seen


def average_states(states: Sequence[dict[str, torch.Tensor]], weights: Sequence[float],
                   skip: Callable[[str], bool] = never) -> dict[str, torch.Tensor]:
    """The weighted average of ``states`` (state dicts with the same keys); keys where ``skip`` holds are left out.

    Integer buffers (e.g. batch-norm counters) are taken from the first state, since they cannot be averaged.
    """
    if len(states) != len(weights) or not states:
        raise ValueError("need one weight per state, and at least one state")
    w = torch.tensor(weights, dtype=torch.float64)
    w = w / w.sum()
    out = {}
    for key, first in states[0].items():
        if skip(key):
            continue
        if not first.is_floating_point():
            out[key] = first.clone()
            continue
        stacked = torch.stack([s[key].to(torch.float64) for s in states])
        out[key] = torch.tensordot(w, stacked, dims=1).to(first.dtype)
    return out


@dataclass
class FedRun:
    """The result of :func:`fedavg`: the global model, each silo's own state, and communication counts."""

    model: nn.Module
    local_states: list[dict[str, torch.Tensor]]
    communication_rounds: int
    uploads: int
    samples_processed: int
    history: list[dict] = field(default_factory=list)

    def silo_model(self, silo: int) -> nn.Module:
        """The global model with silo ``silo``'s local parameters (``keep_local``) put back in."""
        model = copy.deepcopy(self.model)
        model.load_state_dict(self.local_states[silo])
        return model


def fedavg(model: nn.Module, silos: Sequence[Silo], *, rounds: int, local_epochs: int, batch_size: int, lr: float,
           seed: int, participation: float = 1.0, optimizer: Literal["sgd", "adam"] = "sgd",
           loss_fn: LossFn = cross_entropy, proximal_mu: float = 0.0, keep_local: Callable[[str], bool] = never,
           uses_global_rng: bool = False,
           after_round: Callable[[int, nn.Module, list[dict]], None] | None = None) -> FedRun:
    """FedAvg (``proximal_mu > 0``: FedProx) from ``model``'s weights, which it updates in place.

    Each round a ``participation`` share of silos (at least one, drawn without replacement) trains
    ``local_epochs`` on its own data from the global weights plus its own ``keep_local`` parameters; the global
    weights become the average of the uploads weighted by silo training size. ``local_states[s]`` is silo
    ``s``'s full state after its last round (its personal parameters included). ``uploads`` counts one per
    participating silo per round.
    """
    if not 0 < participation <= 1:
        raise ValueError(f"participation must be in (0, 1], got {participation}")
    local_states = [copy.deepcopy(model.state_dict()) for _ in silos]
    uploads = samples = 0
    history = []
    for r in range(rounds):
        rng = numpy_rng(seed, r)
        k = max(1, int(round(participation * len(silos))))
        chosen = np.sort(rng.choice(len(silos), size=k, replace=False))
        global_state = copy.deepcopy(model.state_dict())
        anchor = {name: p.detach().clone() for name, p in model.named_parameters() if not keep_local(name)}
        states, sizes = [], []
        for s in chosen:
            local = copy.deepcopy(model)
            local.load_state_dict({**global_state, **{k_: v for k_, v in local_states[s].items() if keep_local(k_)}})
            samples += local_train(local, silos[s].X_train, silos[s].y_train, epochs=local_epochs,
                                   batch_size=batch_size, lr=lr, rng=numpy_rng(seed, r, int(s)), optimizer=optimizer,
                                   loss_fn=loss_fn, proximal_mu=proximal_mu, anchor=anchor,
                                   uses_global_rng=uses_global_rng)
            local_states[s] = copy.deepcopy(local.state_dict())
            states.append(local_states[s])
            sizes.append(len(silos[s].X_train))
        averaged = average_states(states, sizes, skip=keep_local)
        model.load_state_dict({**global_state, **averaged})
        uploads += len(chosen)
        history.append({"round": r, "participants": chosen.tolist()})
        if after_round is not None:
            after_round(r, model, local_states)
    # Silos that never trained, or trained before the last round, take the final shared weights.
    final = model.state_dict()
    local_states = [{**copy.deepcopy(final), **{k: v for k, v in st.items() if keep_local(k)}} for st in local_states]
    return FedRun(model, local_states, rounds, uploads, samples, history)
