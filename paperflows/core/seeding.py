"""Seeds everywhere, without global state: seeds run concurrently in threads."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch

_GLOBAL_RNGS = threading.RLock()  # re-entrant: a seeded block may build a module that loads its weights


def seed_list(base_seed: int, n_seeds: int) -> list[int]:
    """The seeds of a run: ``base_seed, base_seed + 1, ...`` (``n_seeds`` of them)."""
    return [base_seed + i for i in range(n_seeds)]


def numpy_rng(seed: int, *stream: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and an optional sub-stream (e.g. a method id)."""
    return np.random.default_rng([seed, *stream])


def torch_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@contextmanager
def global_rngs_isolated() -> Iterator[None]:
    """Hold the process's one lock on the global RNGs (torch's and NumPy's ``np.random``) and restore both states
    afterwards.

    For code that draws from them only for values it then overwrites or discards: a module built and then
    loaded from a checkpoint or re-initialised from its own generator, a library that sets the global state
    itself. Outside the lock those draws would shift the stream of a concurrent :func:`torch_seeded` block in
    another thread, and with it that seed's initial weights.
    """
    with _GLOBAL_RNGS, torch.random.fork_rng(devices=[]):
        saved = np.random.get_state()
        try:
            yield
        finally:
            np.random.set_state(saved)


@contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG for code that only uses it (``nn.Module`` initialisation).

    The global RNG is shared by threads, so the block holds the global-RNG lock and restores the previous
    state afterwards: two seeds initialising models at once still get their own weights.
    """
    with global_rngs_isolated():
        torch.manual_seed(seed)
        yield


@contextmanager
def global_rngs_seeded(seed: int) -> Iterator[None]:
    """Seed torch's and NumPy's global RNGs with ``seed`` for a library that only uses them (isolated as
    :func:`global_rngs_isolated`)."""
    with global_rngs_isolated():
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        yield
