"""Data re-uploading statevector simulator against independent references: matrix exponentials,
Kronecker-product matrices, a one-qubit closed form, Monte Carlo averages and brute-force sums."""

import math

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy.linalg import expm

from flows.quantum_reuploading import method as m

X = np.array([[0, 1], [1, 0]], dtype=complex)
Y = np.array([[0, -1j], [1j, 0]], dtype=complex)
Z = np.array([[1, 0], [0, -1]], dtype=complex)
I2 = np.eye(2, dtype=complex)


def _embed(gate: np.ndarray, qubit: int, n: int) -> np.ndarray:
    """I (x) ... (x) gate (x) ... (x) I with qubit 0 as the leftmost (most significant) factor."""
    out = np.eye(1, dtype=complex)
    for q in range(n):
        out = np.kron(out, gate if q == qubit else I2)
    return out


def _cnot_matrix(control: int, target: int, n: int) -> np.ndarray:
    p0, p1 = np.diag([1, 0]).astype(complex), np.diag([0, 1]).astype(complex)
    a, b = np.eye(1, dtype=complex), np.eye(1, dtype=complex)
    for q in range(n):
        a = np.kron(a, p0 if q == control else I2)
        b = np.kron(b, p1 if q == control else (X if q == target else I2))
    return a + b


def _random_states(batch: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(batch, 2 ** n, generator=g, dtype=torch.float64) + 1j * torch.randn(batch, 2 ** n, generator=g, dtype=torch.float64)
    return s / s.abs().pow(2).sum(1, keepdim=True).sqrt()


@pytest.mark.parametrize("a", [0.0, 0.3, -1.7, 2.9, 7.0])
def test_rotations_match_matrix_exponentials(a):
    for fn, pauli in ((m.rx, X), (m.ry, Y), (m.rz, Z)):
        assert np.allclose(fn(torch.tensor(a)).numpy(), expm(-0.5j * a * pauli), atol=1e-13)
    phi, theta, omega = a, 0.7 * a - 0.4, 1.3 - a
    ref = expm(-0.5j * omega * Z) @ expm(-0.5j * theta * Y) @ expm(-0.5j * phi * Z)  # Rot = RZ(om) RY(th) RZ(phi)
    assert np.allclose(m.rot(torch.tensor([phi, theta, omega])).numpy(), ref, atol=1e-13)


@pytest.mark.parametrize("n,qubit", [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)])
def test_one_qubit_gate_matches_kronecker_matrix(n, qubit):
    states = _random_states(5, n, seed=10 * n + qubit)
    angles = torch.tensor([[0.3, -1.1, 2.0], [1.0, 0.2, -0.5], [2.2, 2.2, 0.1], [-0.7, 0.9, 1.4], [0.0, 3.0, -2.0]],
                          dtype=torch.float64)
    gates = m.rot(angles)  # per-sample gates (5, 2, 2)
    out = m.apply_1q(states, gates, qubit, n).numpy()
    for b in range(5):
        assert np.allclose(out[b], _embed(gates[b].numpy(), qubit, n) @ states[b].numpy(), atol=1e-13)
    shared = m.rx(torch.tensor(0.77))  # one gate for the whole batch
    ref = states.numpy() @ _embed(expm(-0.5j * 0.77 * X), qubit, n).T
    assert np.allclose(m.apply_1q(states, shared, qubit, n).numpy(), ref, atol=1e-13)


@pytest.mark.parametrize("n,control,target", [(2, 0, 1), (2, 1, 0), (3, 0, 2), (3, 2, 0), (3, 1, 2)])
def test_cnot_matches_matrix(n, control, target):
    states = _random_states(4, n, seed=control + 3 * target)
    out = states[:, m.cnot_permutation(control, target, n)].numpy()
    assert np.allclose(out, states.numpy() @ _cnot_matrix(control, target, n).T, atol=1e-14)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_cnot_ring_is_the_ordered_product(n):
    ring = np.eye(2 ** n, dtype=complex)
    for q in range(n):  # CNOT(0,1) first, CNOT(N-1,0) last
        ring = _cnot_matrix(q, (q + 1) % n, n) @ ring
    states = _random_states(3, n, seed=n)
    assert np.allclose(states[:, m.cnot_ring_permutation(n)].numpy(), states.numpy() @ ring.T, atol=1e-14)


def _reference_states(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Dense per-sample circuit from matrix exponentials and Kronecker products (no simulator code)."""
    reps, n_layers, n = theta.shape[:3]

    def rot(a):
        return expm(-0.5j * a[2] * Z) @ expm(-0.5j * a[1] * Y) @ expm(-0.5j * a[0] * Z)

    ring = np.eye(2 ** n, dtype=complex)
    if n > 1:
        for q in range(n):
            ring = _cnot_matrix(q, (q + 1) % n, n) @ ring
    out = []
    for xb in x.reshape(len(x), n_layers, n, 3):
        psi = np.zeros(2 ** n, dtype=complex)
        psi[0] = 1
        for p in range(reps):
            for layer in range(n_layers):
                u = np.eye(1, dtype=complex)
                for q in range(n):
                    u = np.kron(u, rot(theta[p, layer, q]) @ rot(xb[layer, q]))
                psi = ring @ (u @ psi)
        out.append(psi)
    return np.array(out)


@pytest.mark.parametrize("n,n_layers,reps", [(1, 3, 2), (2, 2, 1), (2, 3, 2), (3, 2, 2), (4, 1, 2)])
def test_circuit_matches_dense_reference_on_both_paths(n, n_layers, reps):
    rng = np.random.default_rng(n * 100 + n_layers * 10 + reps)
    x = rng.uniform(-np.pi, np.pi, size=(4, 3 * n * n_layers))
    theta = rng.normal(size=(reps, n_layers, n, 3))
    ref = _reference_states(x, theta)
    gates, th = m.encode_inputs(x, n, n_layers), torch.as_tensor(theta)
    for dense in (True, False):
        out = m.circuit_states(gates, th, dense=dense).numpy()
        assert np.allclose(out, ref, atol=1e-12), dense
    z_ref = (np.abs(ref[:, : 2 ** (n - 1)]) ** 2).sum(1) - (np.abs(ref[:, 2 ** (n - 1):]) ** 2).sum(1)
    assert np.allclose(m.predict_z(gates, th).numpy(), z_ref, atol=1e-12)


def test_normalisation_preserved_in_deep_circuits():
    rng = np.random.default_rng(0)
    for n, n_layers, reps in ((2, 32, 3), (5, 3, 2)):
        x = rng.normal(scale=3, size=(16, 3 * n * n_layers))
        s = m.circuit_states(m.encode_inputs(x, n, n_layers), torch.as_tensor(rng.normal(size=(reps, n_layers, n, 3))))
        assert torch.allclose(s.abs().pow(2).sum(1), torch.ones(16, dtype=torch.float64), atol=1e-12)


def test_one_qubit_expectation_closed_form():
    """N = L = R = 1: <Z> = cos t1 cos x1 - sin t1 sin x1 cos(x2 + t0); x0 and t2 do not matter."""
    rng = np.random.default_rng(1)
    x, t = rng.uniform(-4, 4, size=(50, 3)), rng.uniform(-4, 4, size=3)
    z = m.predict_z(m.encode_inputs(x, 1, 1), torch.as_tensor(t).reshape(1, 1, 1, 3)).numpy()
    closed = np.cos(t[1]) * np.cos(x[:, 1]) - np.sin(t[1]) * np.sin(x[:, 1]) * np.cos(x[:, 2] + t[0])
    assert np.allclose(z, closed, atol=1e-13)


def test_loss_is_the_official_softmax_cross_entropy_on_probabilities():
    rng = np.random.default_rng(2)
    p0 = torch.as_tensor(rng.uniform(size=40))
    y = torch.as_tensor(rng.integers(0, 2, size=40)).to(torch.float64)
    ce = torch.nn.functional.cross_entropy(torch.stack([p0, 1 - p0], 1), y.long())
    assert torch.allclose(m.loss_from_z(2 * p0 - 1, y), ce, atol=1e-14)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    gates = m.encode_inputs(rng.uniform(-2, 2, size=(4, 12)), 2, 2)
    y = torch.as_tensor(rng.integers(0, 2, size=4)).to(torch.float64)
    theta = torch.as_tensor(rng.normal(size=(2, 2, 2, 3))).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda th: m.loss_from_z(m.predict_z(gates, th), y), (theta,), eps=1e-6, atol=1e-8)


def test_purity_excess_is_the_pairwise_u_statistic():
    states = _random_states(7, 2, seed=5)
    est = m.purity_excess(states)
    ov = (states.conj() @ states.T).abs().pow(2).numpy()
    pairs = [ov[i, j] for i in range(7) for j in range(7) if i != j]
    assert est["S"] == pytest.approx(4 * np.mean(pairs) - 1, abs=1e-12)
    rho = (states[:, :, None] * states[:, None, :].conj()).mean(0).numpy()
    assert 2 ** m.d2_of_density(rho) - 1 == pytest.approx(est["S_plugin"], abs=1e-12)
    assert m.d2_of_density(np.eye(4) / 4) == pytest.approx(0.0, abs=1e-14)
    assert m.d2_of_density(np.diag([1.0, 0, 0, 0])) == pytest.approx(2.0)


@pytest.mark.parametrize("n,n_layers", [(1, 2), (2, 2), (3, 1)])
def test_exact_iid_mean_state_matches_monte_carlo(n, n_layers):
    theta = torch.as_tensor(np.random.default_rng(n).normal(size=(1, n_layers, n, 3)))
    exact = m.exact_mean_state_iid(theta, 2 / math.pi)
    x = np.random.default_rng(9).uniform(-math.pi / 2, math.pi / 2, size=(40_000, 3 * n * n_layers))
    s = m.circuit_states(m.encode_inputs(x, n, n_layers), theta)
    mc = (s[:, :, None] * s[:, None, :].conj()).mean(0).numpy()
    assert np.abs(exact - mc).max() < 8e-3  # Monte Carlo error ~2e-3 here; swapped or wrong channel factors are off by >= 0.04


def test_exact_iid_d2_closed_form_and_bound():
    """One qubit, one layer: S = (2/pi)^2 for any trainable angles (they act after the data);
    and the paper's bound holds for random circuits at every depth."""
    c = 2 / math.pi
    for seed in range(3):
        theta = torch.as_tensor(np.random.default_rng(seed).normal(size=(1, 1, 1, 3)))
        assert m.d2_of_density(m.exact_mean_state_iid(theta, c)) == pytest.approx(math.log2(1 + c ** 2), abs=1e-12)
    rng = np.random.default_rng(4)
    for n in (1, 2, 3):
        for n_layers in (1, 2, 4, 8):
            theta = torch.as_tensor(rng.normal(size=(1, n_layers, n, 3)))
            d2 = m.d2_of_density(m.exact_mean_state_iid(theta, c))
            assert d2 <= m.d2_bound(n, n_layers, math.pi ** 2 / 12) + 1e-12
            assert d2 <= math.log2(1 + (2 ** n - 1) * c ** (2 * n_layers)) + 1e-12  # the tighter uniform-law rate


def test_synthetic_data_follows_the_official_rule():
    x, y = m.linearly_separable(500, 12, 1.62, np.random.default_rng(0))
    s = x.sum(1)
    assert x.shape == (500, 12) and np.all(np.abs(x) <= math.pi / 2)
    assert np.all(np.abs(s) > 1.62 * math.sqrt(12 * math.pi ** 2 / 12))
    assert np.array_equal(y, (s < 0).astype(float))
    assert 0.4 < y.mean() < 0.6


def test_digits_split_is_standardised_and_disjoint():
    d = m.digits_split(0, 12, (3, 8), 0.5)
    assert d["x_train"].shape[1] == 12 and len(d["x_train"]) + len(d["x_test"]) == 357
    assert np.allclose(d["x_train"].mean(0), 0, atol=1e-10) and np.allclose(d["x_train"].std(0), 1, atol=1e-10)
    assert set(np.unique(d["y_train"])) == {0.0, 1.0}


def tiny_params():
    """A small valid grid: three synthetic D (the fewest Params accepts), 50 diagnostic inputs (its minimum)."""
    return params_for("quantum_reuploading", synthetic_dims=[6, 12, 24], narrow_qubits=2, repetitions=[1, 2],
                      wide_dims=[6], width_dim=12, width_qubits=[2, 4], digits_dims=[6, 12], digits_classes=[3, 8],
                      digits_train_frac=0.5, n_train=40, n_test=60, margin_sd=1.62, d2_samples=50, steps=8, lr=0.05,
                      init_std=1.0)


def test_training_lowers_the_loss_and_is_deterministic_by_seed():
    job = {"dataset": "synthetic", "D": 12, "N": 2, "L": 2, "R": 1}
    p = tiny_params()
    a, b, c = m.run_job(p, 0, job), m.run_job(p, 0, job), m.run_job(p, 1, job)
    strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)
    assert a["train_loss"] < a["train_loss_first"]
    assert a["trained_excess_lcb"] <= 0 and a["trained_iid_d2"] <= a["iid_bound"]


def test_job_grid():
    jobs = m.build_jobs(tiny_params())
    keys = {(j["dataset"], j["D"], j["N"], j["L"], j["R"]) for j in jobs}
    assert len(keys) == len(jobs)
    assert ("synthetic", 12, 4, 1, 1) in keys and ("synthetic", 12, 2, 2, 2) in keys and ("digits", 6, 2, 1, 1) in keys
    # the negative controls: permuted labels for the deep-narrow sweep (R = 1) and the wide circuit at width_dim
    controls = {k for k in keys if k[0] == "synthetic_permuted"}
    assert controls == {("synthetic_permuted", d, 2, d // 6, 1) for d in (6, 12, 24)} | {("synthetic_permuted", 12, 4, 1, 1)}


def test_permuted_control_shuffles_only_the_training_labels():
    p = tiny_params()
    real, perm = m.dataset("synthetic", 0, 12, p), m.dataset("synthetic_permuted", 0, 12, p)
    for key in ("x_train", "x_test", "y_test", "x_diag"):
        assert np.array_equal(real[key], perm[key])
    assert sorted(real["y_train"]) == sorted(perm["y_train"]) and not np.array_equal(real["y_train"], perm["y_train"])
    # the permuted labels carry (almost) no information about the rule y = [sum x <= 0]
    assert abs(np.mean(perm["y_train"] == real["y_train"]) - 0.5) < 0.3


def test_control_metrics_are_computed_from_the_permuted_runs():
    """The flow's controls: Spearman(L, test acc) and wide minus deep on the permuted-label runs only."""
    import pandas as pd

    from flows.quantum_reuploading.evaluate import _metrics

    p = tiny_params()
    rows = []
    for j in m.build_jobs(p):
        for seed in (0, 1, 2):
            # real data: accuracy falls with L; permuted: accuracy rises with L (so a mix-up would show)
            acc = 0.9 - 0.1 * j["L"] if j["dataset"] != "synthetic_permuted" else 0.4 + 0.02 * j["L"] + 0.01 * seed
            rows.append({"seed": seed, **{k: j[k] for k in ("dataset", "D", "N", "L", "R")}, "test_acc": acc,
                         "train_acc": acc, "init_excess_lcb": -0.1 * (seed + 1), "trained_excess_lcb": -0.2,
                         "init_d2": 0.0, "trained_d2": 0.0, "init_bound": 1.0, "trained_bound": 1.0,
                         "init_iid_d2": 0.0, "trained_iid_d2": 0.0, "iid_bound": 1.0, "z_class_gap": 0.1,
                         "z_class_gap_se": 0.01, "z_gap_bound": 1.0, "seconds": 0.0})
    metrics = _metrics(p, pd.DataFrame(rows))
    assert metrics["synthetic"]["deep_narrow"]["spearman_L_test_acc"] == pytest.approx(-1.0)
    ctrl = metrics["synthetic_permuted"]
    assert ctrl["deep_narrow"]["spearman_L_test_acc"] == pytest.approx(1.0)
    assert ctrl["deep_narrow"]["spearman_per_seed"] == pytest.approx([1.0, 1.0, 1.0])
    # wide N = 4, L = 1 minus deep N = 2, L = 2 at D = 12 on permuted labels: 0.42 - 0.44
    assert ctrl["wide_minus_deep"]["mean"] == pytest.approx(-0.02)
    assert metrics["d2"]["empirical"]["max_excess_lcb_per_seed"] == pytest.approx([-0.1, -0.2, -0.2])
    assert metrics["synthetic"]["deep_narrow"]["smallest_L_test_acc"]["mean"] == pytest.approx(0.8)


def test_adam_first_step_and_quadratic():
    """First Adam step moves every coordinate by lr * sign(g); on f = (x - 3)^2 it converges to 3."""
    adam = m.Adam(torch.Size([3]), lr=0.1)
    g = torch.tensor([2.0, -0.5, 1e-3], dtype=torch.float64)
    assert torch.allclose(adam.step(g), 0.1 * torch.sign(g), atol=1e-5)
    x, adam = torch.tensor([0.0], dtype=torch.float64), m.Adam(torch.Size([1]), lr=0.05)
    for _ in range(2000):
        x = x - adam.step(2 * (x - 3))
    assert abs(float(x) - 3) < 1e-2


def test_params_reject_inconsistent_config():
    from flows.quantum_reuploading.params import Params

    good = tiny_params().model_dump()
    Params.model_validate(good)
    for bad in ({"synthetic_dims": [6, 12, 12]}, {"synthetic_dims": [6, 12]}, {"repetitions": [2, 3]},
                {"width_dim": 18}, {"width_qubits": [2]}, {"digits_dims": [6, 9]},
                {"synthetic_dims": [24, 48, 96], "width_dim": 24, "width_qubits": [2, 8]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
