"""DD3D: point-cloud dataset distillation (Bo & Wang, ICML 2025), its ablations and baselines, in plain PyTorch.

Read top to bottom:

1. **Data.** Procedural shape classification (``tasks.point_clouds.shape_classification_set``): each cloud
   is a primitive with random anisotropic scale, a uniform random SO(3) pose and Gaussian jitter; every
   cloud is centred and scaled into the unit ball (the official ``provider.normalize_data``).
2. **Rotator** (the official code, ``--pca``): real clouds are expressed in their PCA frame (covariance
   eigenvectors, largest variance first) as a preprocessing step, and every network input -- real,
   synthetic, test -- passes a sign rule that flips each axis to make ``mean_points sin(w0 x)``
   positive (``InvariantWrapper`` in the official ``CINR.py``). PCA removes the rotation up to a sign per
   axis and the sign rule removes the signs, so the network sees one canonical pose (up to a reflection,
   harmless for these shapes). The rotator is not learned: the paper's text calls it plug-and-play, and
   the official code has a commented-out learned sign predictor next to the fixed rule it uses.
3. **Point-wise generator** (official ``SirenWrapper``): a point of synthetic cloud ``s`` is
   ``G(u, s) = tanh(W2 (sin(w0 (W1 u + b1)) * relu(e_s)))`` for noise ``u ~ U(0, 1)^noise_dim``; the
   resolution is the number of noise draws, so a generator trained at 128 points emits 512-point clouds.
4. **Matching objective** (official ``gm_inr.py``): gradient matching. Each iteration draws a fresh
   PointNet; in each of ``outer_loop`` steps the generator follows the per-class layer-wise cosine
   distance between the network's gradients on a real batch and on the class's synthetic clouds, then
   the network trains ``inner_loop`` steps on the synthetic set.
5. **Baselines.** DM (distribution matching of randomly initialised PointNet features, synthetic points
   optimised directly at the distillation resolution, no rotator), random real clouds per class (with
   and without the rotator, on rotated and on unrotated data), DD3D without rotator, DD3D's untrained
   generator (the controls), and the full real set.
6. **Evaluation.** A fresh PointNet (with the rotator where the method has one) trained with Adam on the
   set, plus the official random-scale and jitter augmentation, and tested on rotated real test clouds.

Shapes: a cloud batch is ``(B, N, 3)`` float32; labels ``(B,)`` int64. Randomness only through explicit
seeds: NumPy generators from ``paperflows.core.seeding.numpy_rng(seed, stream)`` and torch generators / seeded
initialisation per (seed, stream), so one method's result does not depend on what else ran.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.dd3d_pointcloud.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks.point_clouds import shape_classification_set
from tasks.train import torch_single_thread

STREAM = {"train": 1, "test": 2, "dd3d": 3, "dd3d_norot": 4, "dm": 5, "random": 6, "eval": 7, "aligned": 8,
          "memory": 9}


# =============================================================================================
# 1. data
# =============================================================================================
def normalize_unit_ball(x: np.ndarray | torch.Tensor):
    """Centre each cloud ``(B, N, 3)`` at its mean and scale it so its farthest point has norm 1."""
    x = x - x.mean(axis=1, keepdims=True) if isinstance(x, np.ndarray) else x - x.mean(dim=1, keepdim=True)
    if isinstance(x, np.ndarray):
        return x / np.linalg.norm(x, axis=-1).max(axis=1)[:, None, None]
    return x / x.norm(dim=-1).amax(dim=1)[:, None, None]


def make_data(p: Params, seed: int, rotate: bool = True) -> dict[str, np.ndarray]:
    """Train and test sets: ``x_train (C * train_per_class, n_points, 3)``, ``y_train``, ``x_test``, ``y_test``,
    normalised into the unit ball; random SO(3) poses when ``rotate``."""
    kw = dict(rotate=rotate, jitter=p.jitter, scale_range=(p.scale_min, p.scale_max))
    base = STREAM["aligned"] * 100 if not rotate else 0
    x_tr, y_tr = shape_classification_set(p.classes, p.train_per_class, p.n_points,
                                          numpy_rng(seed, base + STREAM["train"]), **kw)
    x_te, y_te = shape_classification_set(p.classes, p.test_per_class, p.n_points,
                                          numpy_rng(seed, base + STREAM["test"]), **kw)
    return {"x_train": normalize_unit_ball(x_tr).astype(np.float32), "y_train": y_tr,
            "x_test": normalize_unit_ball(x_te).astype(np.float32), "y_test": y_te}


# =============================================================================================
# 2. rotator: PCA frame (preprocessing) + sign rule (inside the network)
# =============================================================================================
def pca_frame(x: np.ndarray) -> np.ndarray:
    """Each cloud ``(B, N, 3)`` centred and expressed in its covariance eigenbasis, largest variance first.
    The result is unique up to one sign per axis (and up to rotations within degenerate eigenspaces)."""
    c = x - x.mean(axis=1, keepdims=True)
    cov = np.einsum("bni,bnj->bij", c, c) / x.shape[1]
    _, vecs = np.linalg.eigh(cov.astype(np.float64))                  # ascending eigenvalues
    return np.einsum("bni,bij->bnj", c, vecs[:, :, ::-1]).astype(np.float32)


def sign_canonical(x: torch.Tensor, w0: float) -> torch.Tensor:
    """Flip each axis of each cloud ``(B, N, 3)`` so that ``mean_points sin(w0 x)`` is positive (official
    ``InvariantWrapper``). For small ``w0 x`` this is the sign of minus the third moment along the axis."""
    return x * torch.sign(torch.sin(w0 * x).mean(dim=1, keepdim=True))


def canonicalize(x: np.ndarray, w0: float) -> np.ndarray:
    """The whole rotator on NumPy clouds ``(B, N, 3)``: PCA frame, then the sign rule."""
    return sign_canonical(torch.from_numpy(pca_frame(x)), w0).numpy()


# =============================================================================================
# 3. networks: PointNet (instance norm, max-pool) and the point-wise generator
# =============================================================================================
class PointNet(nn.Module):
    """Shared point MLP ``3 -> widths`` with instance norm over the points (ReLU between layers, none after
    the last, as the official ``PointNet``), max-pool over points, linear classifier. With ``sign_w0`` the
    rotator's sign rule is applied to the input first (the official ``InvariantWrapper``)."""

    def __init__(self, n_classes: int, widths: list[int], sign_w0: float | None):
        super().__init__()
        dims = [3, *widths]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.classifier = nn.Linear(dims[-1], n_classes)
        self.sign_w0 = sign_w0

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, N, 3) -> (B, widths[-1])``."""
        if self.sign_w0 is not None:
            x = sign_canonical(x, self.sign_w0)
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)
            # two-pass variance of the centred activations: torch's (Welford) var kernel is ~15x slower on CPU
            centred = h - h.mean(dim=1, keepdim=True)
            h = centred / torch.sqrt(centred.square().mean(dim=1, keepdim=True) + 1e-5)
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h.amax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.embed(x))


class PointGenerator(nn.Module):
    """``G(u, s) = tanh(W2 (sin(w0 (W1 u + b1)) * relu(e_s)))``: one point per noise vector ``u``, conditioned on
    a learnable code ``e_s`` of synthetic instance ``s``. Initialisation as SIREN's first layer (the official
    ``Siren(is_first=True)``: W1, b1 ~ U(-1/d_in, 1/d_in)); output layer without bias, U(+-sqrt(6/h))."""

    def __init__(self, n_instances: int, noise_dim: int, hidden: int, w0: float):
        super().__init__()
        self.w0 = w0
        self.first = nn.Linear(noise_dim, hidden)
        self.out = nn.Linear(hidden, 3, bias=False)
        self.codes = nn.Embedding(n_instances, hidden)
        with torch.no_grad():
            self.first.weight.uniform_(-1 / noise_dim, 1 / noise_dim)
            self.first.bias.uniform_(-1 / noise_dim, 1 / noise_dim)
            bound = (6 / hidden) ** 0.5
            self.out.weight.uniform_(-bound, bound)

    def forward(self, noise: torch.Tensor, instances: torch.Tensor) -> torch.Tensor:
        """``noise (S, N, noise_dim)``, ``instances (S,)`` -> points ``(S, N, 3)`` in (-1, 1)."""
        h = torch.sin(self.w0 * self.first(noise)) * F.relu(self.codes(instances))[:, None, :]
        return torch.tanh(self.out(h))

    def sample(self, instances: torch.Tensor, n_points: int, generator: torch.Generator) -> torch.Tensor:
        """Clouds ``(S, n_points, 3)`` at any resolution: one uniform noise draw per point."""
        noise = torch.rand(len(instances), n_points, self.first.in_features, generator=generator)
        return self(noise, instances)


def new_net(p: Params, rotator: bool, seed: int) -> PointNet:
    with torch_seeded(seed):
        return PointNet(len(p.classes), list(p.widths), p.sign_w0 if rotator else None)


# =============================================================================================
# 4. matching objectives
# =============================================================================================
def gradient_distance(g_syn: list[torch.Tensor], g_real: list[torch.Tensor]) -> torch.Tensor:
    """The official ``match_loss(dis_metric='ours')``: for every weight matrix ``(out, in)``, the sum over its
    output rows of ``1 - cos(row_syn, row_real)``; bias vectors contribute nothing."""
    total = torch.zeros(())
    for gs, gr in zip(g_syn, g_real):
        if gs.dim() == 1:
            continue
        gs, gr = gs.reshape(gs.shape[0], -1), gr.reshape(gr.shape[0], -1)
        cos = (gs * gr).sum(-1) / (gs.norm(dim=-1) * gr.norm(dim=-1) + 1e-6)
        total = total + (1 - cos).sum()
    return total


def real_batch(x: np.ndarray, idx_c: np.ndarray, p: Params, rng: np.random.Generator) -> torch.Tensor:
    """``batch_real`` real clouds of one class, each subsampled to ``distill_points`` and renormalised
    (the official loop subsamples a random point subset and calls ``normalize_data``): ``(b, n, 3)``."""
    pick = rng.choice(idx_c, size=p.batch_real, replace=False)
    pts = rng.choice(x.shape[1], size=p.distill_points, replace=False)
    return torch.from_numpy(normalize_unit_ball(x[pick][:, pts]).astype(np.float32))


def distill_dd3d(p: Params, x_train: np.ndarray, y_train: np.ndarray, rotator: bool, seed: int,
                 stream: int) -> PointGenerator:
    """Gradient matching with the point-wise generator (official ``gm_inr.py``). ``x_train`` is already in
    the PCA frame when ``rotator``; the networks then apply the sign rule to real and synthetic clouds."""
    n_classes = len(p.classes)
    rng = numpy_rng(seed, stream)
    gen_noise = torch_generator(seed * 1000 + stream)
    with torch_seeded(seed * 1000 + stream):
        gen = PointGenerator(n_classes * p.ipc, p.noise_dim, p.gen_hidden, p.gen_w0)
    opt = torch.optim.Adam(gen.parameters(), lr=p.lr_generator, weight_decay=5e-4)   # official wd_inr
    labels_syn = torch.arange(n_classes).repeat_interleave(p.ipc)
    idx = [np.flatnonzero(y_train == c) for c in range(n_classes)]
    for it in range(p.iterations):
        net = new_net(p, rotator, seed * 100_000 + stream * 1000 + it)
        params = list(net.parameters())
        opt_net = torch.optim.SGD(params, lr=p.lr_net)
        for ol in range(p.outer_loop):
            loss = torch.zeros(())
            for c in range(n_classes):
                xr = real_batch(x_train, idx[c], p, rng)
                g_real = torch.autograd.grad(F.cross_entropy(net(xr), torch.full((len(xr),), c)), params)
                inst = torch.arange(c * p.ipc, (c + 1) * p.ipc)
                xs = gen.sample(inst, p.distill_points, gen_noise)
                g_syn = torch.autograd.grad(F.cross_entropy(net(xs), labels_syn[inst]), params, create_graph=True)
                loss = loss + gradient_distance(g_syn, [g.detach() for g in g_real])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if ol == p.outer_loop - 1:
                break
            with torch.no_grad():                                   # the network learns on the synthetic set
                xs_all = normalize_unit_ball(gen.sample(torch.arange(n_classes * p.ipc), p.distill_points, gen_noise))
            for _ in range(p.inner_loop):
                opt_net.zero_grad()
                F.cross_entropy(net(xs_all), labels_syn).backward()
                opt_net.step()
    return gen


def generate(p: Params, gen: PointGenerator, n_points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic set at ``n_points`` per cloud: ``(C * ipc, n_points, 3)`` normalised, labels ``(C * ipc,)``."""
    inst = torch.arange(len(p.classes) * p.ipc)
    with torch.no_grad():
        x = normalize_unit_ball(gen.sample(inst, n_points, torch_generator(seed)))
    return x.numpy().astype(np.float32), inst.numpy() // p.ipc


def distill_dm(p: Params, x_train: np.ndarray, y_train: np.ndarray, seed: int, stream: int) -> np.ndarray:
    """DM (Zhao & Bilen 2023) on point coordinates, no rotator: synthetic clouds ``(C * ipc, distill_points, 3)``
    initialised as random real clouds (subsampled), then per-class mean embeddings of a fresh randomly
    initialised PointNet are matched (squared distance) with Adam on the coordinates."""
    n_classes = len(p.classes)
    rng = numpy_rng(seed, stream)
    init = []
    for c in range(n_classes):
        pick = rng.choice(np.flatnonzero(y_train == c), size=p.ipc, replace=False)
        pts = rng.choice(x_train.shape[1], size=p.distill_points, replace=False)
        init.append(normalize_unit_ball(x_train[pick][:, pts]))
    syn = torch.tensor(np.concatenate(init), requires_grad=True)
    opt = torch.optim.Adam([syn], lr=p.lr_points)
    idx = [np.flatnonzero(y_train == c) for c in range(n_classes)]
    for it in range(p.dm_iterations):
        net = new_net(p, False, seed * 100_000 + stream * 1000 + it)
        for q in net.parameters():
            q.requires_grad_(False)
        loss = torch.zeros(())
        for c in range(n_classes):
            xr = real_batch(x_train, idx[c], p, rng)
            loss = loss + ((net.embed(xr).mean(0) - net.embed(syn[c * p.ipc:(c + 1) * p.ipc]).mean(0)) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return syn.detach().numpy().astype(np.float32)


# =============================================================================================
# 5. evaluation
# =============================================================================================
def evaluate(p: Params, x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, rotator: bool,
             seed: int) -> float:
    """Train a fresh PointNet (sign rule on when ``rotator``) on ``(x, y)`` for ``eval_steps`` Adam steps with
    the official augmentation (random scale in [0.8, 1.25] per cloud, jitter 0.01 clipped at 0.05);
    return its accuracy on ``(x_test, y_test)``. Inputs are clouds ``(B, N, 3)`` already in the method's frame."""
    net = new_net(p, rotator, seed)
    opt = torch.optim.Adam(net.parameters(), lr=p.eval_lr, weight_decay=5e-4)
    g = torch_generator(seed)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(p.eval_steps):
        batch = torch.randperm(len(xt), generator=g)[:p.eval_batch]
        xb = xt[batch] * (0.8 + 0.45 * torch.rand(len(batch), 1, 1, generator=g))
        xb = xb + torch.clamp(0.01 * torch.randn(xb.shape, generator=g), -0.05, 0.05)
        opt.zero_grad()
        F.cross_entropy(net(xb), yt[batch]).backward()
        opt.step()
    with torch.no_grad():
        pred = torch.cat([net(torch.from_numpy(x_test[i:i + 256])).argmax(-1) for i in range(0, len(x_test), 256)])
    return float((pred.numpy() == y_test).mean())


def random_real(p: Params, x: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``ipc`` random real clouds per class at full resolution: ``(C * ipc, n_points, 3)``, labels."""
    rng = numpy_rng(seed, STREAM["random"])
    pick = np.concatenate([rng.choice(np.flatnonzero(y == c), size=p.ipc, replace=False) for c in range(len(p.classes))])
    return x[pick], y[pick]


# =============================================================================================
# memory: bytes of the tensors autograd keeps for backward in one DD3D matching step
# =============================================================================================
def saved_tensor_bytes(fn) -> int:
    """Run ``fn()`` and return the bytes of the distinct tensors autograd saves for backward meanwhile: the
    activation memory of the step, the part that grows with the number of points (deterministic, unlike
    an allocator's peak on a shared CPU)."""
    seen: dict[tuple[int, int], int] = {}
    alive: list[torch.Tensor] = []          # held until the end, so no freed address is reused and miscounted

    def pack(t: torch.Tensor):
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        seen[key] = t.untyped_storage().nbytes()
        alive.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return int(sum(seen.values()))


def matching_step_bytes(p: Params, n_points: int, seed: int) -> int:
    """Saved-tensor bytes of one class's DD3D gradient-matching step (real batch and ``ipc`` synthetic clouds
    at ``n_points`` each), the quantity that distilling at a low resolution saves."""
    with torch_seeded(seed):
        gen = PointGenerator(len(p.classes) * p.ipc, p.noise_dim, p.gen_hidden, p.gen_w0)
    net = new_net(p, True, seed)
    params = list(net.parameters())
    xr = torch.rand(p.batch_real, n_points, 3, generator=torch_generator(seed))

    def step():
        g_real = torch.autograd.grad(F.cross_entropy(net(xr), torch.zeros(len(xr), dtype=torch.long)), params)
        xs = gen.sample(torch.arange(p.ipc), n_points, torch_generator(seed + 1))
        g_syn = torch.autograd.grad(F.cross_entropy(net(xs), torch.zeros(p.ipc, dtype=torch.long)), params,
                                    create_graph=True)
        gradient_distance(g_syn, [g.detach() for g in g_real]).backward()

    return saved_tensor_bytes(step)


# =============================================================================================
# one seed: every method, evaluated
# =============================================================================================
@dataclass
class Arm:
    """One evaluated set: the clouds, their labels, whether the rotator is on, the test set to use."""
    x: np.ndarray
    y: np.ndarray
    rotator: bool
    test: str


def run_seed(p: Params, seed: int) -> dict:
    """Distil and evaluate every method for one seed; returns ``{"seed", "acc": {arm: accuracy}, "bytes": {...}}``."""
    with torch_single_thread():
        d = make_data(p, seed)
        # the rotator's PCA frame, applied once to real train and test clouds (official preprocessing)
        pca_train, pca_test = pca_frame(d["x_train"]), pca_frame(d["x_test"])
        tests = {"raw": (d["x_test"], d["y_test"]), "pca": (pca_test, d["y_test"])}

        gen = distill_dd3d(p, pca_train, d["y_train"], True, seed, STREAM["dd3d"])
        gen_norot = distill_dd3d(p, d["x_train"], d["y_train"], False, seed, STREAM["dd3d_norot"])
        with torch_seeded(seed * 1000 + STREAM["dd3d"]):             # DD3D's generator before any step
            gen_init = PointGenerator(len(p.classes) * p.ipc, p.noise_dim, p.gen_hidden, p.gen_w0)
        dm = distill_dm(p, d["x_train"], d["y_train"], seed, STREAM["dm"])
        y_syn = np.repeat(np.arange(len(p.classes)), p.ipc)

        arms = {
            "dd3d": Arm(*generate(p, gen, p.n_points, seed), True, "pca"),
            "dd3d_at_distill_res": Arm(*generate(p, gen, p.distill_points, seed), True, "pca"),
            "dd3d_no_rotator": Arm(*generate(p, gen_norot, p.n_points, seed), False, "raw"),
            "untrained_generator": Arm(*generate(p, gen_init, p.n_points, seed), True, "pca"),
            "untrained_generator_at_distill_res": Arm(*generate(p, gen_init, p.distill_points, seed), True, "pca"),
            "dm": Arm(dm, y_syn, False, "raw"),
            "random_real": Arm(*random_real(p, pca_train, d["y_train"], seed), True, "pca"),
            "random_real_no_rotator": Arm(*random_real(p, d["x_train"], d["y_train"], seed), False, "raw"),
            "full_data": Arm(pca_train, d["y_train"], True, "pca"),
        }
        # the rotator claims' control: the rotator's gain where there is no rotation to undo (unrotated data)
        a = make_data(p, seed, rotate=False)
        tests["aligned_raw"] = (a["x_test"], a["y_test"])
        tests["aligned_pca"] = (pca_frame(a["x_test"]), a["y_test"])
        arms["aligned_random_real"] = Arm(*random_real(p, pca_frame(a["x_train"]), a["y_train"], seed), True, "aligned_pca")
        arms["aligned_random_real_no_rotator"] = Arm(*random_real(p, a["x_train"], a["y_train"], seed), False, "aligned_raw")

        acc = {name: evaluate(p, arm.x, arm.y, *tests[arm.test], arm.rotator, seed * 1000 + STREAM["eval"])
               for name, arm in arms.items()}
        memory = {"distill_res": matching_step_bytes(p, p.distill_points, seed * 1000 + STREAM["memory"]),
                  "eval_res": matching_step_bytes(p, p.n_points, seed * 1000 + STREAM["memory"])}
    return {"seed": seed, "acc": acc, "bytes": memory}
