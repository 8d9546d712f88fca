"""Seeds everywhere, without global state: seeds run concurrently in threads."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch

_TORCH_GLOBAL_RNG = threading.Lock()


def seed_list(base_seed: int, n_seeds: int) -> list[int]:
    """The seeds of a run: ``base_seed, base_seed + 1, ...`` (``n_seeds`` of them)."""
    return [base_seed + i for i in range(n_seeds)]


def numpy_rng(seed: int, *stream: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and an optional sub-stream (e.g. a method id)."""
    return np.random.default_rng([seed, *stream])


def torch_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG for code that only uses it (``nn.Module`` initialisation).

    The global RNG is shared by threads, so the block holds a lock and restores the previous
    state afterwards: two seeds initialising models at once still get their own weights.
    """
    with _TORCH_GLOBAL_RNG, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
