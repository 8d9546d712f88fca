"""dd3d_pointcloud: the rotator, generator, matching losses, memory measure and evaluation against independent
references (smoke run, determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for

from flows.dd3d_pointcloud import method
from tasks.point_clouds import random_rotations


def _asymmetric_clouds(n: int, rng: np.random.Generator) -> np.ndarray:
    """Clouds with distinct variances per axis and a non-zero third moment on each (a skewed Gaussian)."""
    z = rng.standard_normal((n, 400, 3))
    z = z + 0.4 * (z**2 - 1)                                          # skew every axis
    return (z * np.array([1.0, 0.6, 0.3])).astype(np.float64)


def test_pca_frame_diagonalises_the_covariance_in_decreasing_order():
    x = _asymmetric_clouds(4, np.random.default_rng(0)) @ random_rotations(1, np.random.default_rng(1))[0].T
    f = method.pca_frame(x).astype(np.float64)
    cov = np.einsum("bni,bnj->bij", f, f) / f.shape[1]
    off = cov - np.einsum("bii->bi", cov)[:, :, None] * np.eye(3)
    assert np.abs(off).max() < 1e-4 and np.allclose(f.mean(axis=1), 0, atol=1e-5)
    var = np.einsum("bii->bi", cov)
    assert (np.diff(var, axis=1) < 0).all()
    # the variances are the covariance eigenvalues of the original cloud (numpy's eigvalsh, independent)
    ref = np.linalg.eigvalsh(np.cov(x[0].T, bias=True))[::-1]
    assert np.allclose(var[0], ref, rtol=1e-4)


def test_rotator_is_invariant_to_random_rotations():
    rng = np.random.default_rng(2)
    x = _asymmetric_clouds(6, rng)
    R = random_rotations(6, rng)
    rotated = np.einsum("bij,bnj->bni", R, x)
    a, b = method.canonicalize(x, 1.0), method.canonicalize(rotated, 1.0)
    assert np.allclose(a, b, atol=1e-4)
    # without the sign rule, a PCA frame is only defined up to axis signs: the rule is needed
    flipped = method.pca_frame(x) * np.array([-1, 1, -1], dtype=np.float32)
    assert np.allclose(method.sign_canonical(torch.from_numpy(flipped), 1.0).numpy(), a, atol=1e-5)
    assert not np.allclose(flipped, a, atol=1e-3)


def test_sign_rule_matches_the_third_moment_for_small_coordinates():
    # sin(w0 x) ~ w0 x - (w0 x)^3 / 6 and the cloud is centred: sign(mean sin) = -sign(third moment)
    x = torch.from_numpy(method.pca_frame(_asymmetric_clouds(5, np.random.default_rng(3)) * 0.05))
    signs = torch.sign(torch.sin(x).mean(dim=1))
    third = (x**3).mean(dim=1)
    assert torch.equal(signs, -torch.sign(third))
    out = method.sign_canonical(x, 1.0)
    assert (torch.sin(out).mean(dim=1) > 0).all()


def test_pointnet_with_rotator_is_blind_to_axis_flips_and_point_order():
    p = params_for("dd3d_pointcloud")
    net = method.new_net(p, rotator=True, seed=0)
    x = torch.from_numpy(method.pca_frame(_asymmetric_clouds(3, np.random.default_rng(4)).astype(np.float32)))
    flips = torch.tensor([[[-1.0, 1.0, -1.0]], [[1.0, -1.0, 1.0]], [[-1.0, -1.0, -1.0]]])
    perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(net(x), net(x * flips), atol=1e-5)
        assert torch.allclose(net(x), net(x[:, perm]), atol=1e-5)
        plain = method.new_net(p, rotator=False, seed=0)
        assert not torch.allclose(plain(x), plain(x * flips), atol=1e-3)   # without it, flips matter


def test_instance_norm_matches_torch():
    p = params_for("dd3d_pointcloud")
    net = method.new_net(p, rotator=False, seed=1)
    x = torch.randn(2, 50, 3)
    h = net.layers[0](x)
    ours = (h - h.mean(1, keepdim=True)) / torch.sqrt(h.var(1, unbiased=False, keepdim=True) + 1e-5)
    ref = F.instance_norm(h.transpose(1, 2), eps=1e-5).transpose(1, 2)
    assert torch.allclose(ours, ref, atol=1e-5)


def test_generator_resolution_is_the_number_of_noise_draws():
    gen = method.PointGenerator(n_instances=4, noise_dim=1, hidden=32, w0=30.0)
    u = torch.rand(4, 512, 1, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hi = gen(u, torch.arange(4))
        lo = gen(u[:, :128], torch.arange(4))
        assert hi.shape == (4, 512, 3) and (hi.abs() < 1).all()
        # point-wise: the first 128 points at high resolution are the 128 points at low resolution (up to float32
        # rounding: a batch of 512 rows and one of 128 may take different matmul kernels; 1.7e-6 seen with AVX-512)
        assert torch.allclose(hi[:, :128], lo, atol=1e-5)
        # and a point is the closed form tanh(W2 (sin(w0 (W1 u + b1)) * relu(e_s)))
        h = np.sin(30.0 * (u[1, 7].numpy() @ gen.first.weight.numpy().T + gen.first.bias.numpy()))
        h = h * np.maximum(gen.codes.weight[1].numpy(), 0)
        assert np.allclose(hi[1, 7].numpy(), np.tanh(gen.out.weight.numpy() @ h), atol=1e-5)
        s = gen.sample(torch.arange(2), 77, torch.Generator().manual_seed(1))
        assert s.shape == (2, 77, 3)


def test_gradient_distance_against_a_direct_computation():
    rng = np.random.default_rng(5)
    gs = [torch.tensor(rng.standard_normal((4, 3))), torch.tensor(rng.standard_normal(4)),
          torch.tensor(rng.standard_normal((2, 4)))]
    gr = [torch.tensor(rng.standard_normal((4, 3))), torch.tensor(rng.standard_normal(4)),
          torch.tensor(rng.standard_normal((2, 4)))]
    ref = 0.0
    for a, b in ((gs[0], gr[0]), (gs[2], gr[2])):                    # biases are ignored
        for ra, rb in zip(a.numpy(), b.numpy()):
            ref += 1 - ra @ rb / (np.linalg.norm(ra) * np.linalg.norm(rb) + 1e-6)
    assert np.isclose(float(method.gradient_distance(gs, gr)), ref, atol=1e-9)
    # parallel rows cost ~0, opposite rows cost 2 each (4 + 2 rows)
    assert float(method.gradient_distance(gs, [3 * g for g in gs])) < 1e-5
    assert np.isclose(float(method.gradient_distance(gs, [-g for g in gs])), 2 * 6, atol=1e-5)


def test_normalize_unit_ball_numpy_and_torch_agree():
    x = np.random.default_rng(6).standard_normal((3, 40, 3)).astype(np.float32) * 5 + 2
    a = method.normalize_unit_ball(x)
    b = method.normalize_unit_ball(torch.from_numpy(x)).numpy()
    assert np.allclose(a, b, atol=1e-6)
    assert np.allclose(np.linalg.norm(a, axis=-1).max(axis=1), 1) and np.allclose(a.mean(axis=1), 0, atol=1e-6)


def test_saved_tensor_bytes_counts_what_autograd_keeps():
    # y = sum(exp(x)): autograd saves exp's output, n float32 values; twice the points, twice the bytes
    def step(n):
        x = torch.ones(n, requires_grad=True)
        return method.saved_tensor_bytes(lambda: torch.exp(x).sum().backward())
    assert step(1000) == 4000 and step(2000) == 8000
    p = params_for("dd3d_pointcloud")
    lo, hi = method.matching_step_bytes(p, 32, 0), method.matching_step_bytes(p, 128, 0)
    assert 2.5 < hi / lo <= 4.0 + 1e-9                               # activations scale with the points


def test_dm_starts_from_normalised_real_clouds_and_moves_them_toward_the_real_embedding():
    p = params_for("dd3d_pointcloud")
    d = method.make_data(p, 0)
    syn0 = method.distill_dm(p.model_copy(update={"dm_iterations": 1, "lr_points": 1e-9}), d["x_train"], d["y_train"], 0, 5)
    assert syn0.shape == (len(p.classes) * p.ipc, p.distill_points, 3)
    assert np.allclose(np.linalg.norm(syn0, axis=-1).max(axis=1), 1, atol=1e-4)     # renormalised real subsets
    syn = method.distill_dm(p.model_copy(update={"dm_iterations": 40, "lr_points": 0.01}), d["x_train"], d["y_train"], 0, 5)
    assert np.abs(syn - syn0).max() > 0.05

    # on a fixed embedding, the class-mean embedding gap shrinks (averaged over fresh random networks)
    def gap(x):
        out = []
        for k in range(5):
            net = method.new_net(p, False, 10_000 + k)
            with torch.no_grad():
                for c in range(len(p.classes)):
                    real = net.embed(torch.from_numpy(d["x_train"][d["y_train"] == c])).mean(0)
                    out.append(float(((real - net.embed(torch.from_numpy(x[c * p.ipc:(c + 1) * p.ipc])).mean(0)) ** 2).sum()))
        return np.mean(out)
    assert gap(syn) < gap(syn0)


def test_evaluation_learns_a_separable_task_and_fails_on_permuted_labels():
    p = params_for("dd3d_pointcloud", classes=["sphere", "box"], train_per_class=30, test_per_class=30, eval_steps=100, eval_lr=0.01,
                   eval_batch=16, widths=[16, 16])
    d = method.make_data(p, 0)
    x, xt = method.pca_frame(d["x_train"]), method.pca_frame(d["x_test"])
    acc = method.evaluate(p, x, d["y_train"], xt, d["y_test"], True, 0)
    shuffled = np.random.default_rng(0).permutation(d["y_train"])
    acc_perm = method.evaluate(p, x, shuffled, xt, d["y_test"], True, 0)
    assert acc > 0.9 and acc_perm < 0.8


@pytest.mark.parametrize("rotate", [True, False])
def test_make_data_is_normalised_and_rotation_follows_the_flag(rotate):
    p = params_for("dd3d_pointcloud")
    d = method.make_data(p, 1, rotate=rotate)
    assert d["x_train"].shape == (len(p.classes) * p.train_per_class, p.n_points, 3)
    assert np.allclose(np.linalg.norm(d["x_train"], axis=-1).max(axis=1), 1, atol=1e-5)
    # a torus's axis (its least-variance direction) is z when unrotated; rotated, it is spread over the sphere
    torus = d["x_train"][d["y_train"] == p.classes.index("torus")].astype(np.float64)
    _, vecs = np.linalg.eigh(np.einsum("bni,bnj->bij", torus, torus))
    z_alignment = np.abs(vecs[:, 2, 0])
    assert (z_alignment.min() > 0.95) == (not rotate)


def test_a_collapsed_seed_fails_the_gate_and_the_claims_that_require_it():
    from flows.dd3d_pointcloud.claims import PAPER
    from paperflows.core.claims import check_claim
    by_id = {c.id: c for c in PAPER.claims}
    m = {"accuracy": {"dd3d": {"mean": 0.5}}, "per_seed_accuracy": {"dd3d": [0.6, 0.7, 0.15]}}
    assert check_claim(by_id["dd3d_learned_task"], m, 3).verdict == "not reproduced"   # one seed near chance
    m["per_seed_accuracy"]["dd3d"][2] = 0.5
    assert check_claim(by_id["dd3d_learned_task"], m, 3).verdict == "reproduced"
    claim = by_id["rotator_helps"]
    m = {"diff": {"rotator_gain": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.15},
                  "rotator_gain_unrotated": {"mean": -0.1, "ci_low": -0.15, "ci_high": -0.05}}}
    healthy = {s: "reproduced" for s in claim.requires}
    assert check_claim(claim, m, 5, healthy).verdict == "reproduced"
    assert check_claim(claim, m, 5, {**healthy, "dd3d_learned_task": "not reproduced"}).verdict == "inconclusive"
    assert all("dd3d_learned_task" in c.requires for c in PAPER.claims if c.role == "claim")
