"""A small, deterministic torch training loop for classifiers and regressors."""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn

from paperflows.core.seeding import torch_generator


_THREADS = {"lock": threading.Lock(), "users": 0, "saved": 1}


@contextmanager
def torch_single_thread() -> Iterator[None]:
    """One torch intra-op thread while any caller is inside.

    Seeds already run in parallel tasks; small models with torch's own threads on top oversubscribe
    a 2-core machine badly, and one thread fixes the reduction order. The OpenMP setting is per
    thread, so every entering thread sets it; the previous value comes back when the last caller
    leaves (a count, so concurrent seeds never restore it under each other).
    """
    with _THREADS["lock"]:
        if _THREADS["users"] == 0:
            _THREADS["saved"] = torch.get_num_threads()
        _THREADS["users"] += 1
        torch.set_num_threads(1)
    try:
        yield
    finally:
        with _THREADS["lock"]:
            _THREADS["users"] -= 1
            if _THREADS["users"] == 0:
                torch.set_num_threads(_THREADS["saved"])


@functools.cache
def warm_up_optimiser() -> None:
    """Take one ``torch.optim.Adam`` step on a dummy parameter, once per process.

    The first optimiser step of a process imports ``torch._dynamo`` (seconds on a laptop); a method timed
    against another must not pay that one-off cost inside its timer.
    """
    weight = torch.zeros(1, requires_grad=True)
    optimiser = torch.optim.Adam([weight])
    weight.sum().backward()
    optimiser.step()


def mlp(n_inputs: int, hidden: list[int], n_outputs: int, activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """A fully connected network ``n_inputs -> hidden... -> n_outputs``."""
    layers: list[nn.Module] = []
    width = n_inputs
    for h in hidden:
        layers += [nn.Linear(width, h), activation()]
        width = h
    layers.append(nn.Linear(width, n_outputs))
    return nn.Sequential(*layers)


def train(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
          epochs: int, batch_size: int, lr: float, seed: int, weight_decay: float = 0.0) -> list[float]:
    """Adam on mini-batches of ``(X, y)`` (shapes (n, ...) and (n, ...)); returns the mean loss per epoch.

    Batches are drawn from a generator seeded by ``seed``, so two calls with the same model
    initialisation and seed give the same weights.
    """
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch_generator(seed)
    history = []
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=generator)
        total = 0.0
        for start in range(0, len(X), batch_size):
            idx = order[start:start + batch_size]
            optimiser.zero_grad()
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(idx)
        history.append(total / len(X))
    model.eval()
    return history


@torch.no_grad()
def predict(model: nn.Module, X: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    model.eval()
    return torch.cat([model(X[i:i + batch_size]) for i in range(0, len(X), batch_size)])
