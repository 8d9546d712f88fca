"""Bit fingerprints of the numeric primitives the papers use: one md5 prefix per primitive.

Two machines that print the same line compute that primitive to the same bits; a machine whose whole
fingerprint equals the committed one (``paperflows fingerprint --check``) should reproduce the committed
results bit for bit. Each primitive runs on one thread, as in the flows' seed tasks; the inputs are fixed
draws, so the hashes depend only on the kernels the CPU and the environment select
(:mod:`paperflows.settings` pins them). The primitives and their inputs are those of the shared reference
(``../shared/reference/fingerprint.py``) so that the two can be compared line by line.
"""

from __future__ import annotations

import functools
import hashlib
import platform
from typing import Any, Callable

import numpy as np

Primitive = Callable[[], Any]


def digest_of(value: Any) -> str:
    """md5 prefix of an array's bytes (a tensor is read back to NumPy)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return hashlib.md5(np.ascontiguousarray(np.asarray(value)).tobytes()).hexdigest()[:10]


def _numpy_primitives() -> dict[str, Primitive]:
    import scipy.linalg
    import scipy.optimize
    import scipy.sparse.linalg
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(257, 300)), rng.normal(size=(300, 129))
    spd = a @ a.T / 300 + np.eye(257)
    labels = (a[:, 0] + 0.3 * rng.normal(size=257) > 0).astype(int)
    return {
        "np.random.normal": lambda: rng.normal(size=1000),
        "np.matmul_f64": lambda: a @ b,
        "np.matmul_f32": lambda: a.astype(np.float32) @ b.astype(np.float32),
        "np.dot_vec": lambda: np.array([a[0] @ a[1]]),
        "np.sum_f64": lambda: np.array([a.sum()]),
        "np.exp_log": lambda: np.log1p(np.exp(a[:5])),
        "np.linalg.solve": lambda: np.linalg.solve(spd, a[:, 0]),
        "np.linalg.eigh": lambda: np.linalg.eigvalsh(spd),
        "np.linalg.svd": lambda: np.linalg.svd(a[:60, :80], compute_uv=False),
        "np.fft": lambda: np.fft.rfft(a[0]),
        "scipy.cho_solve": lambda: scipy.linalg.cho_solve(scipy.linalg.cho_factor(spd), a[:, 1]),
        "scipy.linprog_highs": lambda: scipy.optimize.linprog(-np.abs(b[:40, 0]), A_ub=np.abs(a[:30, :40]),
                                                              b_ub=np.ones(30), bounds=(0, 1), method="highs").x,
        "scipy.eigsh": lambda: np.sort(scipy.sparse.linalg.eigsh(spd, k=4, v0=np.ones(257))[0]),
        "sklearn.logreg": lambda: LogisticRegression(max_iter=500).fit(a[:, :20], labels).coef_,
        "sklearn.kmeans": lambda: KMeans(4, n_init=2, random_state=0).fit(a[:, :10]).cluster_centers_,
    }, a, b, spd


def _torch_primitives(a: np.ndarray, b: np.ndarray, spd: np.ndarray) -> dict[str, Primitive]:
    import torch
    import torch.nn.functional as F

    ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    images, kernels = torch.randn(8, 3, 16, 16, generator=g), torch.randn(6, 3, 3, 3, generator=g)
    heads = torch.randn(2, 4, 16, 8, generator=g)

    def trained(net: torch.nn.Module, optimizer: Callable, steps: int, loss: Callable) -> torch.Tensor:
        opt = optimizer(net.parameters())
        for _ in range(steps):
            opt.zero_grad()
            loss(net).backward()
            opt.step()
        return torch.cat([p.detach().flatten() for p in net.parameters()])

    def mlp_adam() -> torch.Tensor:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(300, 64), torch.nn.GELU(), torch.nn.Linear(64, 10))
        return trained(net, lambda ps: torch.optim.Adam(ps, 1e-3), 50, lambda n: n(ta).logsumexp(1).mean())

    def cnn_sgd() -> torch.Tensor:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                  torch.nn.Flatten(), torch.nn.Linear(8, 2))
        return trained(net, lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9), 30,
                       lambda n: F.cross_entropy(n(images), torch.arange(8) % 2))

    return {
        "torch.randn": lambda: torch.randn(1000, generator=torch.Generator().manual_seed(1)),
        "torch.mm_f32": lambda: ta @ tb,
        "torch.mm_f64": lambda: torch.tensor(a) @ torch.tensor(b),
        "torch.bmm": lambda: torch.bmm(heads[0], heads[0].transpose(-1, -2)),
        "torch.sum_f32": lambda: ta.sum(),
        "torch.softmax": lambda: torch.softmax(ta, 1),
        "torch.logsumexp": lambda: ta.logsumexp(1),
        "torch.tanh_exp": lambda: torch.tanh(ta).exp(),
        "torch.gelu": lambda: F.gelu(ta),
        "torch.sigmoid": lambda: torch.sigmoid(ta),
        "torch.layer_norm": lambda: F.layer_norm(ta, (300,)),
        "torch.conv2d": lambda: F.conv2d(images, kernels, padding=1),
        "torch.sdpa": lambda: F.scaled_dot_product_attention(heads, heads, heads, is_causal=True),
        "torch.linalg.eigvalsh": lambda: torch.linalg.eigvalsh(torch.tensor(spd)),
        "torch.cdist": lambda: torch.cdist(ta[:50], ta[50:100]),
        "torch.mlp_adam_50_steps": mlp_adam,
        "torch.cnn_sgd_30_steps": cnn_sgd,
    }


@functools.cache
def fingerprint() -> dict[str, str]:
    """{primitive: md5 prefix}, each computed on one BLAS/OpenMP and one torch thread (shape of the values:
    whatever each primitive returns; only its bytes count). The two training loops seed torch's global RNG, so
    the whole computation holds the global-RNG lock and restores its state (:mod:`paperflows.core.seeding`)."""
    import torch
    from threadpoolctl import threadpool_limits

    from paperflows.core.seeding import global_rngs_isolated

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1), global_rngs_isolated():
            numpy_primitives, a, b, spd = _numpy_primitives()
            primitives = {**numpy_primitives, **_torch_primitives(a, b, spd)}
            return {name: digest_of(compute()) for name, compute in primitives.items()}
    finally:
        torch.set_num_threads(previous)


def header() -> str:
    """The comment line of a fingerprint file: platform, torch's kernel level and the package versions."""
    import scipy
    import sklearn
    import torch

    return (f"# {platform.processor() or platform.machine()} | torch {torch.__version__} "
            f"cap={torch.backends.cpu.get_cpu_capability()} | numpy {np.__version__} | scipy {scipy.__version__} "
            f"| sklearn {sklearn.__version__}")


def fingerprint_text() -> str:
    """The fingerprint as a file: the header, then ``name hash`` per line."""
    return "\n".join([header(), *(f"{name:28s} {value}" for name, value in fingerprint().items())]) + "\n"


def parse_fingerprint(text: str) -> dict[str, str]:
    """{primitive: hash} of a fingerprint file (comment lines skipped)."""
    return dict(line.split() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def fingerprint_digest(hashes: dict[str, str] | None = None) -> str:
    """One md5 prefix over all primitive hashes (``hashes``, e.g. a file's :func:`parse_fingerprint`; default:
    this machine's :func:`fingerprint`): equal digests, equal bits on every primitive."""
    joined = "\n".join(f"{name} {value}" for name, value in (fingerprint() if hashes is None else hashes).items())
    return hashlib.md5(joined.encode()).hexdigest()[:12]
