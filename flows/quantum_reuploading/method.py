"""Data re-uploading classifiers on a batched statevector simulator (PyTorch, no quantum SDK).

Paper: Wang, Tao, Wu, "Predictive Performance of Deep Quantum Data Re-uploading Models" (ICML 2025).
The circuit family, the data and the loss follow the official code
(github.com/SheffieldWang/deep-quantum-data-reuploading, ``model/model.py``, ``train_utils``,
``datasets_utils``):

* input x of dimension D = 3 * N * L, reshaped to (L, N, 3) (layer-major: feature
  ``l * 3N + 3n + k`` goes to layer l, qubit n, angle k);
* encoding layer l (repetition p): on every qubit n, ``Rot(x[l, n])`` then the trainable
  ``Rot(theta[p, l, n])``, then a CNOT ring ``CNOT(0,1), CNOT(1,2), ..., CNOT(N-1,0)`` (none for N = 1);
  ``Rot(phi, th, om) = RZ(om) RY(th) RZ(phi)`` as in PennyLane;
* repetition: the whole block of L encoding layers is applied R times, each time with new trainable
  parameters (``GeneralCircuit`` with ``n_reps``);
* readout: probabilities of qubit 0, used as the two logits of a softmax cross-entropy; with
  z = <Z_0> = p0 - p1 the loss is ``softplus(-s z)``, s = +1 for class 0 and -1 for class 1, and the
  prediction is class 0 iff z > 0;
* trainable angles initialised N(0, 1), Adam.

Theory checked here (the paper's bound): for features that are independent across encoding
gates with variance sigma^2, ``D_2(E_x[rho(x)] || I/2^N) <= log2(1 + (2^N - 1) exp(-L sigma^2))``
for any trainable parameters, where ``D_2(rho || I/d) = log2(d Tr rho^2)``. Hence for every class,
``|E_{x|y} <Z_0>| <= sqrt((2^N - 1) exp(-L sigma^2))``: the class-mean outputs collapse together
and the prediction approaches random guessing as L grows.

Qubit 0 is the most significant bit of the basis index (PennyLane's wire order). Randomness only
through ``np.random.default_rng`` / ``torch.Generator`` seeded explicitly.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np
import torch
from sklearn.decomposition import PCA

from flows.quantum_reuploading.params import Params
from tasks.data import load_bundled

CDTYPE = torch.complex128
RDTYPE = torch.float64
HALF_PI = math.pi / 2
UNIFORM_VAR = math.pi ** 2 / 12  # variance of U(-pi/2, pi/2), the official synthetic features


# --------------------------------------------------------------------------- gates
def rx(a: torch.Tensor) -> torch.Tensor:
    """RX(a) = exp(-i a X / 2); a of shape (...,) -> (..., 2, 2) complex."""
    a = torch.as_tensor(a, dtype=RDTYPE)
    c, s = torch.cos(a / 2).to(CDTYPE), torch.sin(a / 2).to(CDTYPE)
    return torch.stack([torch.stack([c, -1j * s], -1), torch.stack([-1j * s, c], -1)], -2)


def ry(a: torch.Tensor) -> torch.Tensor:
    """RY(a) = exp(-i a Y / 2); (...,) -> (..., 2, 2)."""
    a = torch.as_tensor(a, dtype=RDTYPE)
    c, s = torch.cos(a / 2).to(CDTYPE), torch.sin(a / 2).to(CDTYPE)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def rz(a: torch.Tensor) -> torch.Tensor:
    """RZ(a) = exp(-i a Z / 2); (...,) -> (..., 2, 2)."""
    a = torch.as_tensor(a, dtype=RDTYPE)
    zero = torch.zeros_like(a, dtype=CDTYPE)
    return torch.stack([torch.stack([torch.exp(-0.5j * a), zero], -1),
                        torch.stack([zero, torch.exp(0.5j * a)], -1)], -2)


def rot(angles: torch.Tensor) -> torch.Tensor:
    """PennyLane ``Rot(phi, theta, omega) = RZ(omega) RY(theta) RZ(phi)`` in closed form.

    angles: (..., 3) real (phi, theta, omega) -> (..., 2, 2) complex.
    """
    angles = torch.as_tensor(angles, dtype=RDTYPE)
    phi, theta, omega = angles[..., 0], angles[..., 1], angles[..., 2]
    c, s = torch.cos(theta / 2), torch.sin(theta / 2)
    plus, minus = (phi + omega) / 2, (phi - omega) / 2
    e = lambda ang: torch.polar(torch.ones_like(ang), ang)  # noqa: E731  exp(i ang)
    row0 = torch.stack([e(-plus) * c, -e(minus) * s], -1)
    row1 = torch.stack([e(-minus) * s, e(plus) * c], -1)
    return torch.stack([row0, row1], -2)


# --------------------------------------------------------------------------- statevector
def zero_state(batch: int, n_qubits: int) -> torch.Tensor:
    """|0...0> for a batch: (batch, 2^N) complex."""
    state = torch.zeros(batch, 2 ** n_qubits, dtype=CDTYPE)
    state[:, 0] = 1.0
    return state


def apply_1q(state: torch.Tensor, gate: torch.Tensor, qubit: int, n_qubits: int) -> torch.Tensor:
    """Apply a one-qubit gate to ``qubit``. state (B, 2^N); gate (2, 2) or per-sample (B, 2, 2)."""
    b = state.shape[0]
    s = state.reshape(b, 2 ** qubit, 2, 2 ** (n_qubits - qubit - 1))
    s0, s1 = s[:, :, 0], s[:, :, 1]
    g = gate.reshape(-1, 4, 1, 1)  # (B or 1, [g00, g01, g10, g11], 1, 1)
    # out[:, :, i] = g[i, 0] s[:, :, 0] + g[i, 1] s[:, :, 1]: elementwise, faster than batched 2x2 matmuls
    return torch.stack([g[:, 0] * s0 + g[:, 1] * s1, g[:, 2] * s0 + g[:, 3] * s1], 2).reshape(b, -1)


def matmul_2x2(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for broadcastable stacks of 2x2 matrices (..., 2, 2), by broadcasting."""
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)


def cnot_permutation(control: int, target: int, n_qubits: int) -> torch.Tensor:
    """Index map of CNOT: ``new_state = state[:, perm]`` (2^N,) long."""
    idx = torch.arange(2 ** n_qubits)
    cbit = (idx >> (n_qubits - 1 - control)) & 1
    return idx ^ (cbit << (n_qubits - 1 - target))


@functools.lru_cache(maxsize=None)
def cnot_ring_permutation(n_qubits: int) -> torch.Tensor | None:
    """CNOT(0,1), CNOT(1,2), ..., CNOT(N-1,0) composed into one index map; None for N = 1."""
    if n_qubits < 2:
        return None
    perm = torch.arange(2 ** n_qubits)
    for n in range(n_qubits):
        perm = perm[cnot_permutation(n, (n + 1) % n_qubits, n_qubits)]
    return perm


def expval_z0(state: torch.Tensor, n_qubits: int) -> torch.Tensor:
    """<Z> of qubit 0 (most significant bit) = p0 - p1; state (B, 2^N) -> (B,) real."""
    probs = (state.real ** 2 + state.imag ** 2).reshape(state.shape[0], 2, 2 ** (n_qubits - 1)).sum(-1)
    return probs[:, 0] - probs[:, 1]


# --------------------------------------------------------------------------- the model
def encode_inputs(x: np.ndarray | torch.Tensor, n_qubits: int, n_layers: int) -> torch.Tensor:
    """Data gates ``Rot(x[l, n])`` for a batch: x (B, D = 3 N L) -> (B, L, N, 2, 2) complex."""
    x = torch.as_tensor(np.asarray(x), dtype=RDTYPE)
    if x.shape[1] != 3 * n_qubits * n_layers:
        raise ValueError(f"D = {x.shape[1]} does not equal 3 * N * L = {3 * n_qubits * n_layers}")
    return rot(x.reshape(x.shape[0], n_layers, n_qubits, 3))


DENSE_MAX_QUBITS = 3  # up to here a layer is one per-sample 2^N x 2^N matrix; above, gate by gate


def kron_all(gates: torch.Tensor) -> torch.Tensor:
    """Kronecker product over the qubit axis, qubit 0 most significant: (..., N, 2, 2) -> (..., 2^N, 2^N)."""
    out = gates[..., 0, :, :]
    for n in range(1, gates.shape[-3]):
        g = gates[..., n, :, :]
        d = out.shape[-1]
        out = (out[..., :, None, :, None] * g[..., None, :, None, :]).reshape(*out.shape[:-2], 2 * d, 2 * d)
    return out


def product_state(gates: torch.Tensor) -> torch.Tensor:
    """(G_0 (x) G_1 (x) ...)|0...0> = the Kronecker product of the first columns: (..., N, 2, 2) -> (..., 2^N)."""
    out = gates[..., 0, :, 0]
    for n in range(1, gates.shape[-3]):
        out = (out[..., :, None] * gates[..., n, None, :, 0]).reshape(*out.shape[:-1], -1)
    return out


def circuit_states(data_gates: torch.Tensor, theta: torch.Tensor, dense: bool | None = None) -> torch.Tensor:
    """Final states of the re-uploading circuit.

    data_gates: (B, L, N, 2, 2) from :func:`encode_inputs`; theta: (R, L, N, 3) trainable angles.
    Returns (B, 2^N) complex. The first layer acts on |0...0>, so it is built as a product state;
    later layers are applied either as one dense per-sample matrix ``P (T_0 (x) ... ) (X_0 (x) ...)``
    (``dense``, default for N <= 3; P the CNOT ring) or gate by gate (:func:`apply_1q`).
    """
    b, n_layers, n_qubits = data_gates.shape[:3]
    if dense is None:
        dense = n_qubits <= DENSE_MAX_QUBITS
    perm = cnot_ring_permutation(n_qubits)
    trainable = rot(theta)  # (R, L, N, 2, 2)

    def ring(state: torch.Tensor) -> torch.Tensor:
        return state if perm is None else state[:, perm]

    state = ring(product_state(matmul_2x2(trainable[0, 0], data_gates[:, 0])))  # Rot(theta) Rot(x) on |0>
    later = [(p, layer) for p in range(theta.shape[0]) for layer in range(n_layers)][1:]
    if not later:
        return state
    if dense:
        data_k = kron_all(data_gates)  # (B, L, d, d)
        train_k = kron_all(trainable)  # (R, L, d, d)
        if perm is not None:
            train_k = train_k[..., perm, :]
        for p, layer in later:
            state = (data_k[:, layer] * state[:, None, :]).sum(-1)  # per-sample (X_0 (x) ...) state
            state = state @ train_k[p, layer].transpose(0, 1)       # shared P (T_0 (x) ...)
        return state
    for p, layer in later:
        for n in range(n_qubits):
            state = apply_1q(state, matmul_2x2(trainable[p, layer, n], data_gates[:, layer, n]), n, n_qubits)
        state = ring(state)
    return state


def predict_z(data_gates: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """<Z_0> per sample: (B,) real."""
    return expval_z0(circuit_states(data_gates, theta), data_gates.shape[2])


def loss_from_z(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Official softmax cross-entropy on the logits (p0, p1) = softplus(-s z), s = 1 - 2y."""
    return torch.nn.functional.softplus(-(1.0 - 2.0 * y) * z).mean()


def accuracy_from_z(z: torch.Tensor, y: torch.Tensor) -> float:
    """Class 0 iff z > 0 (argmax of (p0, p1), ties to class 0 as ``argmax`` does)."""
    return float(((z < 0).to(RDTYPE) == y).to(RDTYPE).mean())


def train(data_gates: torch.Tensor, y: np.ndarray, n_reps: int, steps: int, lr: float, init_std: float,
          seed: int) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
    """Full-batch Adam on the official loss. Returns (theta_init, theta_trained, loss per step)."""
    _, n_layers, n_qubits = data_gates.shape[:3]
    gen = torch.Generator().manual_seed(int(seed))
    theta0 = init_std * torch.randn(n_reps, n_layers, n_qubits, 3, generator=gen, dtype=RDTYPE)
    theta = theta0.clone().requires_grad_(True)
    yt = torch.as_tensor(y, dtype=RDTYPE)
    adam = Adam(theta.shape, lr)
    losses = []
    for _ in range(steps):
        loss = loss_from_z(predict_z(data_gates, theta), yt)
        (grad,) = torch.autograd.grad(loss, theta)
        with torch.no_grad():
            theta -= adam.step(grad)
        losses.append(float(loss.detach()))
    return theta0, theta.detach(), losses


class Adam:
    """Adam (Kingma & Ba) with the defaults of optax.adam / torch.optim.Adam (b1 0.9, b2 0.999,
    eps 1e-8 added after the square root). Written out because constructing ``torch.optim.Adam``
    imports torch._dynamo, which costs seconds per process."""

    def __init__(self, shape: torch.Size, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0
        self.m = torch.zeros(shape, dtype=RDTYPE)
        self.v = torch.zeros(shape, dtype=RDTYPE)

    def step(self, grad: torch.Tensor) -> torch.Tensor:
        """The update to subtract from the parameters."""
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad * grad
        m_hat = self.m / (1 - self.b1 ** self.t)
        v_hat = self.v / (1 - self.b2 ** self.t)
        return self.lr * m_hat / (v_hat.sqrt() + self.eps)


# --------------------------------------------------------------------------- Renyi-2 diagnostics
def d2_bound(n_qubits: int, n_layers: int, sigma2: float) -> float:
    """The paper's bound log2(1 + (2^N - 1) exp(-L sigma^2))."""
    return math.log2(1.0 + (2 ** n_qubits - 1) * math.exp(-n_layers * sigma2))


def d2_of_density(rho: np.ndarray) -> float:
    """Petz-Renyi-2 divergence to the maximally mixed state: log2(d Tr rho^2); rho (d, d)."""
    return float(math.log2(rho.shape[0] * np.real(np.trace(rho @ rho))))


def purity_excess(states: torch.Tensor) -> dict[str, float]:
    """Unbiased estimate of ``S = d Tr(E[rho]^2) - 1`` (the squared Pauli weight of the mean state,
    so that D_2 = log2(1 + S)) from pure states (M, d), with its standard error.

    U-statistic: Tr(E rho)^2 = E_{i != j} |<psi_i|psi_j>|^2; SE from the Hoeffding projection,
    2 std_i(mean_j |<psi_i|psi_j>|^2) / sqrt(M).
    """
    m, d = states.shape
    overlap = (states.conj() @ states.T).abs() ** 2  # (M, M), diagonal = 1
    off = overlap.sum(1) - overlap.diagonal()
    h1 = off / (m - 1)
    purity = float(off.sum() / (m * (m - 1)))
    se = float(2 * h1.std() / math.sqrt(m)) if m > 2 else float("nan")
    return {"S": d * purity - 1.0, "S_se": d * se, "S_plugin": float(d * (overlap.sum() / m ** 2) - 1.0)}


def d2_diagnostic(data_gates: torch.Tensor, theta: torch.Tensor, sigma2: float, n_layers_bound: int) -> dict:
    """Empirical D_2(E_x rho(x) || I/d) of the circuit over the inputs behind ``data_gates`` vs the bound.

    ``d2`` uses the unbiased S; ``d2_lcb`` uses S - 3 SE (clipped at 0): the bound is violated only
    if ``d2_lcb`` exceeds it.
    """
    n_qubits = data_gates.shape[2]
    with torch.no_grad():
        est = purity_excess(circuit_states(data_gates, theta))
    bound = d2_bound(n_qubits, n_layers_bound, sigma2)
    d2 = math.log2(1 + max(est["S"], 0.0))
    d2_lcb = math.log2(1 + max(est["S"] - 3 * est["S_se"], 0.0))
    return {**est, "d2": d2, "d2_lcb": d2_lcb, "bound": bound, "excess_lcb": d2_lcb - bound,
            "S_bound": (2 ** n_qubits - 1) * math.exp(-n_layers_bound * sigma2)}


def averaged_rot_pauli_factors(c: float) -> tuple[float, float, float]:
    """Pauli-transfer eigenvalues (X, Y, Z) of ``E_x[Rot(x) . Rot(x)^dagger]`` for three independent
    angles with a symmetric law, ``c = E[cos x]`` (so ``E[sin x] = 0``).

    The averaged RZ keeps Z and multiplies X, Y by c; the averaged RY keeps Y and multiplies X, Z by c;
    Rot = RZ RY RZ gives X: c^3, Y: c^2, Z: c. For x ~ U(-pi/2, pi/2), c = 2/pi.
    """
    return c ** 3, c ** 2, c


PAULIS = np.array([[[1, 0], [0, 1]], [[0, 1], [1, 0]], [[0, -1j], [1j, 0]], [[1, 0], [0, -1]]], dtype=complex)


def pauli_channel(rho: np.ndarray, qubit: int, n_qubits: int, lam: tuple[float, float, float]) -> np.ndarray:
    """Pauli-diagonal channel with transfer eigenvalues ``lam = (l_X, l_Y, l_Z)`` on one qubit of rho (d, d)."""
    lx, ly, lz = lam
    probs = [(1 + lx + ly + lz) / 4, (1 + lx - ly - lz) / 4, (1 - lx + ly - lz) / 4, (1 - lx - ly + lz) / 4]
    a, c = 2 ** qubit, 2 ** (n_qubits - qubit - 1)
    r = rho.reshape(a, 2, c, a, 2, c)
    out = np.zeros_like(r)
    for p, pauli in zip(probs, PAULIS):
        out += p * np.einsum("ij,ajbckd,lk->aibcld", pauli, r, pauli.conj())
    return out.reshape(rho.shape)


def exact_mean_state_iid(theta: torch.Tensor, c: float) -> np.ndarray:
    """Exact ``E_x[rho(x)]`` of a one-repetition circuit (theta (1, L, N, 3)) when every encoding angle
    is independent with ``E[cos x] = c``, ``E[sin x] = 0``: averaged data channels interleaved with the
    trainable rotations and the CNOT ring, on a density matrix. Returns (2^N, 2^N) complex."""
    _, n_layers, n_qubits = theta.shape[:3]
    d = 2 ** n_qubits
    lam = averaged_rot_pauli_factors(c)
    perm = cnot_ring_permutation(n_qubits)
    pmat = np.eye(d)[perm.numpy()] if perm is not None else np.eye(d)
    trainable = rot(theta).numpy()
    rho = np.zeros((d, d), dtype=complex)
    rho[0, 0] = 1.0
    for layer in range(n_layers):
        for n in range(n_qubits):
            rho = pauli_channel(rho, n, n_qubits, lam)
        u = pmat @ kron_all(torch.as_tensor(trainable[0, layer])).numpy()
        rho = u @ rho @ u.conj().T
    return rho


# --------------------------------------------------------------------------- data
def linearly_separable(n: int, dim: int, margin_sd: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Official synthetic data: x ~ U(-pi/2, pi/2)^D, w = (1, ..., 1), kept if |w.x| > margin,
    y = 0 if w.x > 0 else 1. The official margin is 0.3 D; here margin = margin_sd * std(w.x)
    = margin_sd * sqrt(D pi^2/12) (the official value at D = 24 is margin_sd = 1.62), so that
    rejection sampling stays feasible up to D = 192. Returns x (n, D), y (n,) in {0, 1}."""
    margin = margin_sd * math.sqrt(dim * UNIFORM_VAR)
    keep_x = []
    kept = 0
    while kept < n:
        x = rng.uniform(-HALF_PI, HALF_PI, size=(max(4 * n, 256), dim))
        x = x[np.abs(x.sum(1)) > margin]
        keep_x.append(x)
        kept += len(x)
    x = np.concatenate(keep_x)[:n]
    return x, (x.sum(1) <= 0).astype(np.float64)


def synthetic_split(seed: int, dim: int, n_train: int, n_test: int, n_diag: int,
                    margin_sd: float) -> dict[str, np.ndarray]:
    """Train/test/diagnostic draws (``n_train``, ``n_test``, ``n_diag`` points) of the synthetic task for
    (seed, D); independent of N, L, R."""
    rng = np.random.default_rng([seed, dim, 11])
    x, y = linearly_separable(n_train + n_test, dim, margin_sd, rng)
    xd, _ = linearly_separable(n_diag, dim, margin_sd, np.random.default_rng([seed, dim, 12]))
    return {"x_train": x[:n_train], "y_train": y[:n_train], "x_test": x[n_train:], "y_test": y[n_train:],
            "x_diag": xd}


def digits_split(seed: int, dim: int, classes: tuple[int, int], train_frac: float) -> dict[str, np.ndarray]:
    """scikit-learn digits, two ``classes`` (first -> 0, second -> 1), a seeded stratified split with a
    share ``train_frac`` of each class for training, PCA to D components fitted on the train part, each
    component standardised with train stats. The diagnostic sample is the test part."""
    X, y = load_bundled("digits")
    a, b = classes
    mask = y.isin([a, b]).to_numpy()
    x = X.to_numpy(dtype=np.float64)[mask] / 16.0
    lab = (y.to_numpy()[mask] == b).astype(np.float64)
    rng = np.random.default_rng([seed, 21])
    train_idx = np.concatenate([rng.permutation(np.flatnonzero(lab == c))[: int(round(train_frac * (lab == c).sum()))]
                                for c in (0.0, 1.0)])
    test_mask = np.ones(len(lab), bool)
    test_mask[train_idx] = False
    train_idx = np.sort(train_idx)
    pca = PCA(n_components=dim, svd_solver="full").fit(x[train_idx])
    z_train, z_test = pca.transform(x[train_idx]), pca.transform(x[test_mask])
    mu, sd = z_train.mean(0), z_train.std(0)
    z_train, z_test = (z_train - mu) / sd, (z_test - mu) / sd
    return {"x_train": z_train, "y_train": lab[train_idx], "x_test": z_test, "y_test": lab[test_mask],
            "x_diag": z_test}


def dataset(name: str, seed: int, dim: int, p: Params) -> dict[str, np.ndarray]:
    """The draw of data set ``name`` for (seed, D): synthetic (reads ``p.n_train``, ``p.n_test``,
    ``p.d2_samples``, ``p.margin_sd``), synthetic_permuted (the same draw, training labels permuted) or
    digits (``p.digits_classes``, ``p.digits_train_frac``)."""
    if name == "synthetic":
        return synthetic_split(seed, dim, p.n_train, p.n_test, p.d2_samples, p.margin_sd)
    if name == "synthetic_permuted":
        # the negative control: the same draw with the training labels shuffled (a seeded permutation),
        # test labels untouched, so no circuit can learn anything that predicts the test set
        data = synthetic_split(seed, dim, p.n_train, p.n_test, p.d2_samples, p.margin_sd)
        data["y_train"] = np.random.default_rng([seed, dim, 13]).permutation(data["y_train"])
        return data
    if name == "digits":
        return digits_split(seed, dim, tuple(p.digits_classes), p.digits_train_frac)
    raise ValueError(f"unknown dataset {name!r}")


# --------------------------------------------------------------------------- experiment grid
def build_jobs(p: Params) -> list[dict]:
    """Every (dataset, D, N, L, R) of the run, deduplicated, most expensive first.

    deep-narrow: N = ``p.narrow_qubits``, L = D / (3N) for D in ``p.synthetic_dims`` with R in
    ``p.repetitions`` and for D in ``p.digits_dims`` with R = 1; wide: N = D / 3, L = 1 for D in
    ``p.wide_dims``; width sweep at D = ``p.width_dim``: N in ``p.width_qubits``, L = D / (3N);
    negative controls on synthetic_permuted (training labels permuted), R = 1: the deep-narrow circuits
    at every synthetic D and the wide circuit N = D/3, L = 1 at D = ``p.width_dim``.
    """
    jobs: dict[tuple, dict] = {}

    def add(ds: str, dim: int, n: int, r: int, role: str) -> None:
        if dim % (3 * n):
            raise ValueError(f"D = {dim} is not a multiple of 3 N = {3 * n}")
        key = (ds, dim, n, dim // (3 * n), r)
        job = jobs.setdefault(key, {"dataset": ds, "D": dim, "N": n, "L": dim // (3 * n), "R": r, "roles": []})
        job["roles"].append(role)

    n0 = p.narrow_qubits
    for dim in p.synthetic_dims:
        for r in p.repetitions:
            add("synthetic", dim, n0, r, "deep_narrow")
    for dim in p.digits_dims:
        add("digits", dim, n0, 1, "deep_narrow")
    for ds in ("synthetic", "digits"):
        for dim in p.wide_dims:
            add(ds, dim, dim // 3, 1, "wide")
    for ds in ("synthetic", "digits"):
        for n in p.width_qubits:
            add(ds, p.width_dim, n, 1, "width_sweep")
    for dim in p.synthetic_dims:
        add("synthetic_permuted", dim, n0, 1, "control")
    add("synthetic_permuted", p.width_dim, p.width_dim // 3, 1, "control")
    cost = lambda j: j["R"] * j["L"] * (j["N"] + 2) * (1 + 2 ** j["N"] / 64)  # noqa: E731
    return sorted(jobs.values(), key=lambda j: (-cost(j), j["dataset"], j["D"], j["N"], j["R"]))


def run_job(p: Params, seed: int, job: dict) -> dict[str, Any]:
    """Train one circuit (a job of :func:`build_jobs`) on one dataset draw; JSON-able scalars.

    Reads the data fields of ``p`` (see :func:`dataset`) and ``p.steps``, ``p.lr``, ``p.init_std``.
    The trainable-parameter seed depends on (seed, N, L, R) only, the data on (seed, dataset, D).
    """
    t0 = time.perf_counter()
    data = dataset(job["dataset"], seed, job["D"], p)
    n, L, r = job["N"], job["L"], job["R"]
    g_train = encode_inputs(data["x_train"], n, L)
    g_test = encode_inputs(data["x_test"], n, L)
    init_seed = int(np.random.default_rng([seed, n, L, r, 31]).integers(2 ** 62))
    theta0, theta, losses = train(g_train, data["y_train"], r, p.steps, p.lr, p.init_std, init_seed)
    y_tr, y_te = torch.as_tensor(data["y_train"]), torch.as_tensor(data["y_test"])
    with torch.no_grad():
        z_tr, z_te, z_te0 = predict_z(g_train, theta), predict_z(g_test, theta), predict_z(g_test, theta0)
    out: dict[str, Any] = {
        "seed": seed, **{k: job[k] for k in ("dataset", "D", "N", "L", "R")},
        "train_acc": accuracy_from_z(z_tr, y_tr), "test_acc": accuracy_from_z(z_te, y_te),
        "test_acc_init": accuracy_from_z(z_te0, y_te),
        "train_loss": losses[-1], "train_loss_first": losses[0],
        "test_loss": float(loss_from_z(z_te, y_te)),
        # class-mean <Z_0> on the test set and the bound sqrt((2^N - 1) e^{-L sigma^2}) on each of them
        "z_mean_class0": float(z_te[y_te == 0].mean()), "z_mean_class1": float(z_te[y_te == 1].mean()),
    }
    out["z_class_gap"] = abs(out["z_mean_class0"] - out["z_mean_class1"])
    z0, z1 = z_te[y_te == 0], z_te[y_te == 1]
    out["z_class_gap_se"] = float(torch.sqrt(z0.var() / len(z0) + z1.var() / len(z1)))  # finite test set
    xd = data["x_diag"]
    sigma2 = float(xd.var(0).mean())
    out["sigma2"] = sigma2
    out["z_gap_bound"] = 2 * math.sqrt((2 ** n - 1) * math.exp(-L * sigma2))
    gd = encode_inputs(xd, n, L)
    for stage, th in (("init", theta0), ("trained", theta)):
        diag = d2_diagnostic(gd, th, sigma2, L)
        out.update({f"{stage}_{k}": v for k, v in diag.items() if k in ("S", "S_se", "d2", "d2_lcb", "bound", "excess_lcb")})
    if job["dataset"] == "synthetic" and r == 1:
        # exact E_x[rho] for i.i.d. U(-pi/2, pi/2) angles (the theorem's setting, before the margin filter)
        out["iid_bound"] = d2_bound(n, L, UNIFORM_VAR)
        for stage, th in (("init", theta0), ("trained", theta)):
            out[f"{stage}_iid_d2"] = d2_of_density(exact_mean_state_iid(th, 2 / math.pi))
    out["seconds"] = time.perf_counter() - t0
    return out


def run_seed(p: Params, seed: int) -> dict[str, Any]:
    """Every job of the grid for one seed (sequential); ``{"seed", "rows": [run_job(...), ...]}``."""
    return {"seed": seed, "rows": [run_job(p, seed, job) for job in build_jobs(p)]}
