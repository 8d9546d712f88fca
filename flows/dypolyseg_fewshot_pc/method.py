"""DyPolySeg (few-shot point-cloud semantic segmentation) and its baselines, no Prefect; read top to bottom.

1. Local geometry, DyPolyConv = LoConv + DyHoConv over the k nearest neighbours of every point:
   LoConv is the low-order (linear) term of a local polynomial fit: a shared MLP on the relative
   coordinates and feature differences [p_j - p_i, f_j - f_i, f_i], max-pooled over the neighbours
   ("flat" structure); DyHoConv is the high-order term: signed monomials sign(d) |d|^a_k of the
   (radius-normalised) relative coordinates with exponents a_k that are learnable *and* predicted per
   point from its feature (dynamic), then a shared MLP and max-pooling ("detailed" structure).
2. Global context: a Mamba-style selective state-space block over the points serialised along the
   Morton curve. STAND-IN: the paper uses the CUDA Mamba kernel; here a pure-torch selective SSM with a
   scalar input-dependent decay per head (Mamba-2's structured-state-space-duality form, computed as a
   masked L x L matrix, exact for the recurrence and tested against the sequential scan), run forward
   and backward over the sequence.
3. Few-shot head: masked average pooling of support features -> one prototype per way plus a background
   prototype; cosine similarity x a scale gives each query point's logits.
4. PCM (prototype completion module): self-enhancement (residual MLP on the prototypes) and
   interactive enhancement (each query scene's points are attended to by the prototypes, so the
   prototypes move towards the query's feature distribution).

Baselines: a prototype network over a PointNet-style encoder (shared per-point MLP + global max-pool),
and DyPolySeg without PCM; the ablation without DyHoConv; and a replicate of DyPolySeg trained from
another initialisation and episode stream (the negative control: two identical models).

Details not in the abstract (no official code found) follow the plan, which infers them from the same
group's TaylorSeg paper: the exact layer widths, the exponent parameterisation and the PCM attention
are our choices.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from flows.dypolyseg_fewshot_pc.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks import point_clouds as pc
from tasks.train import torch_single_thread

ARMS = ("dypolyseg", "dypolyseg_rep", "no_pcm", "no_dyho", "protonet_pointnet")
"""dypolyseg: the full model; dypolyseg_rep: the same model from another init and episode stream (null
control); no_pcm / no_dyho: ablations; protonet_pointnet: a prototype network over a PointNet encoder."""


# ---------------------------------------------------------------------------------------------------
# neighbourhoods
# ---------------------------------------------------------------------------------------------------

def knn(xyz: torch.Tensor, k: int) -> torch.Tensor:
    """Indices ``(B, L, k)`` of the k nearest points of each point (itself included) in ``xyz`` (B, L, 3)."""
    return torch.cdist(xyz, xyz).topk(k, dim=-1, largest=False).indices


def gather(f: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Neighbour features ``(B, L, k, C)`` from ``f`` (B, L, C) and ``idx`` (B, L, k)."""
    return f[torch.arange(f.shape[0])[:, None, None], idx]


def relative_positions(xyz: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``p_j - p_i`` ``(B, L, k, 3)`` divided by the neighbourhood radius of ``i``: the polynomial's
    argument lies in [-1, 1], so powers of it neither explode nor vanish with the point density."""
    d = gather(xyz, idx) - xyz[:, :, None]
    radius = d.norm(dim=-1).amax(dim=-1, keepdim=True)[..., None]
    return d / (radius + 1e-6)


# ---------------------------------------------------------------------------------------------------
# DyPolyConv = LoConv + DyHoConv
# ---------------------------------------------------------------------------------------------------

class LoConv(nn.Module):
    """Low-order term: max_j MLP([p_j - p_i, f_j - f_i, f_i]); (B, L, c_in) -> (B, L, c_out)."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3 + 2 * c_in, c_out), nn.ReLU(), nn.Linear(c_out, c_out))

    def forward(self, rel: torch.Tensor, f: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        fj = gather(f, idx)
        fi = f[:, :, None].expand_as(fj)
        return self.mlp(torch.cat([rel, fj - fi, fi], dim=-1)).amax(dim=2)


def dynamic_monomials(rel: torch.Tensor, exponents: torch.Tensor) -> torch.Tensor:
    """Signed monomials ``sign(d) |d|^a``: ``rel`` (B, L, k, 3), ``exponents`` (B, L, K) -> (B, L, k, 3 K).

    The sign keeps odd symmetry (a = 1 is the identity, a = 3 is d^3); |d| is floored so that the
    gradient in a (log |d| |d|^a) stays finite at the centre point itself (d = 0)."""
    mag = rel.abs().clamp_min(1e-4)[..., None]                          # (B, L, k, 3, 1)
    a = exponents[:, :, None, None, :]                                  # (B, L, 1, 1, K)
    return (torch.sign(rel)[..., None] * mag.pow(a)).flatten(-2)


class DyHoConv(nn.Module):
    """Dynamic high-order term: exponents a_ik = 0.5 + softplus(theta_k + w_k . f_i), initialised at
    a_k = 1..K (w = 0); max_j MLP(monomials(p_j - p_i; a_i)); (B, L, c_in) -> (B, L, c_out)."""

    def __init__(self, c_in: int, c_out: int, orders: int):
        super().__init__()
        start = torch.arange(1, orders + 1, dtype=torch.float32) - 0.5
        self.theta = nn.Parameter(torch.log(torch.expm1(start)))        # softplus^-1, so a starts at 1..K
        self.dynamic = nn.Linear(c_in, orders)
        nn.init.zeros_(self.dynamic.weight)
        nn.init.zeros_(self.dynamic.bias)
        self.mlp = nn.Sequential(nn.Linear(3 * orders, c_out), nn.ReLU(), nn.Linear(c_out, c_out))

    def exponents(self, f: torch.Tensor) -> torch.Tensor:
        """Per-point exponents ``(B, L, K)`` from features ``f`` (B, L, c_in)."""
        return 0.5 + F.softplus(self.theta + self.dynamic(f))

    def forward(self, rel: torch.Tensor, f: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return self.mlp(dynamic_monomials(rel, self.exponents(f))).amax(dim=2)


class DyPolyConv(nn.Module):
    """LoConv + (optionally) DyHoConv, a normalisation and a residual projection; (B, L, c_in) -> (B, L, c_out)."""

    def __init__(self, c_in: int, c_out: int, orders: int, use_high_order: bool):
        super().__init__()
        self.low = LoConv(c_in, c_out)
        self.high = DyHoConv(c_in, c_out, orders) if use_high_order else None
        self.norm = nn.LayerNorm(c_out)
        self.skip = nn.Linear(c_in, c_out)

    def forward(self, rel: torch.Tensor, f: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        h = self.low(rel, f, idx)
        if self.high is not None:
            h = h + self.high(rel, f, idx)
        return F.relu(self.norm(h) + self.skip(f))


# ---------------------------------------------------------------------------------------------------
# pure-torch selective state-space block (stand-in for CUDA Mamba)
# ---------------------------------------------------------------------------------------------------

def selective_scan(u: torch.Tensor, log_decay: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Selective SSM with a scalar decay per head, in its matrix ("dual") form.

    Recurrence per head: h_t = exp(log_decay_t) h_{t-1} + B_t u_t^T, y_t = h_t^T C_t, i.e.
    y_t = sum_{s <= t} exp(sum_{r = s+1..t} log_decay_r) (C_t . B_s) u_s.
    Shapes: ``u`` (Bt, H, L, P) inputs (already multiplied by the step size), ``log_decay`` (Bt, H, L) <= 0,
    ``B``, ``C`` (Bt, H, L, N) -> ``y`` (Bt, H, L, P). Exact in O(L^2) memory, no sequential loop.
    """
    cum = log_decay.cumsum(dim=-1)                                      # (Bt, H, L)
    diff = cum[..., :, None] - cum[..., None, :]                        # t - s, <= 0 for s <= t
    causal = torch.ones(diff.shape[-2:], dtype=torch.bool).tril()
    decay = torch.exp(diff.masked_fill(~causal, float("-inf")))         # (Bt, H, L, L)
    scores = C @ B.transpose(-1, -2) * decay
    return scores @ u


def bidirectional_scan(u: torch.Tensor, log_decay: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """``selective_scan`` forward plus ``selective_scan`` over the reversed sequence (flipped back), as one
    L x L matrix: the backward scan is the anti-causal half, y_t += sum_{s >= t} exp(sum_{r = t..s-1}
    log_decay_r) (C_t . B_s) u_s, so C B^T is formed once and both halves share one exp and one matmul
    (half the L x L work of two scans). Same shapes as ``selective_scan``."""
    L = log_decay.shape[-1]
    cum = log_decay.cumsum(dim=-1)                                      # inclusive: the forward exponents
    excl = cum - log_decay                                              # exclusive: the backward exponents
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    exponent = torch.where(causal, cum[..., :, None] - cum[..., None, :], excl[..., None, :] - excl[..., :, None])
    decay = torch.exp(exponent) + torch.eye(L)                          # <= 0 everywhere; s = t counted by both
    return (C @ B.transpose(-1, -2) * decay) @ u


class SSMBlock(nn.Module):
    """Mamba-style block: in-projection to (x, gate), input-dependent step size dt, B and C per token,
    scan forward and backward over the sequence, gated out-projection, residual; (Bt, L, d) -> (Bt, L, d)."""

    def __init__(self, d: int, d_state: int, heads: int):
        super().__init__()
        if d % heads:
            raise ValueError("d must be divisible by heads")
        self.heads, self.d_state = heads, d_state
        self.norm = nn.LayerNorm(d)
        self.in_proj = nn.Linear(d, 2 * d)
        self.to_dt = nn.Linear(d, heads)
        self.to_bc = nn.Linear(d, 2 * heads * d_state)
        self.a_log = nn.Parameter(torch.zeros(heads))                   # A = -exp(a_log) < 0: a stable decay
        self.skip = nn.Parameter(torch.ones(d))                         # Mamba's D term
        self.out_proj = nn.Linear(d, d)

    def scan_inputs(self, x: torch.Tensor, xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The scan's ``(u, log_decay, B, C)`` (shapes of ``selective_scan``) from ``x``, ``xs`` (Bt, L, d)."""
        bt, L, d = x.shape
        H, N = self.heads, self.d_state
        dt = F.softplus(self.to_dt(xs)).transpose(1, 2)                 # (Bt, H, L)
        bc = self.to_bc(xs).view(bt, L, 2, H, N).permute(2, 0, 3, 1, 4)  # (2, Bt, H, L, N)
        u = x.view(bt, L, H, d // H).transpose(1, 2) * dt[..., None]    # (Bt, H, L, P)
        return u, -torch.exp(self.a_log)[None, :, None] * dt, bc[0], bc[1]

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        xs = self.norm(f)
        x, gate = self.in_proj(xs).chunk(2, dim=-1)
        x = F.silu(x)
        bt, L, d = x.shape
        y = bidirectional_scan(*self.scan_inputs(x, xs))                # both directions: points have no arrow
        y = y.transpose(1, 2).reshape(bt, L, d)
        y = (y + self.skip * x) * F.silu(gate)
        return f + self.out_proj(y)


# ---------------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------------

class DyPolySegEncoder(nn.Module):
    """xyz (B, L, 3) -> per-point features (B, L, c_out): embedding, two DyPolyConv layers, the SSM block
    over the Morton order, and a head over the concatenated multi-level features."""

    def __init__(self, p: Params, use_high_order: bool = True):
        super().__init__()
        w = p.width
        self.k = p.k_neighbors
        self.embed = nn.Linear(3, w)
        self.conv1 = DyPolyConv(w, w, p.orders, use_high_order)
        self.conv2 = DyPolyConv(w, 2 * w, p.orders, use_high_order)
        self.ssm = SSMBlock(2 * w, p.d_state, p.ssm_heads)
        self.head = nn.Sequential(nn.Linear(3 * w + 2 * w, 2 * w), nn.ReLU(), nn.Linear(2 * w, p.feature_dim))

    def forward(self, xyz: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        idx = knn(xyz, self.k)
        rel = relative_positions(xyz, idx)
        f0 = self.embed(xyz)
        f1 = self.conv1(rel, f0, idx)
        f2 = self.conv2(rel, f1, idx)
        rows = torch.arange(xyz.shape[0])[:, None]
        g = torch.empty_like(f2)
        g[rows, order] = self.ssm(f2[rows, order])                       # scan in Morton order, scatter back
        return self.head(torch.cat([f1, f2, g], dim=-1))


class PointNetEncoder(nn.Module):
    """PointNet-style segmentation encoder: shared per-point MLP, global max-pool, per-point MLP over
    [local, global]; xyz (B, L, 3) -> (B, L, c_out). No neighbourhoods, no sequence model."""

    def __init__(self, p: Params):
        super().__init__()
        w = p.width
        self.local = nn.Sequential(nn.Linear(3, w), nn.ReLU(), nn.Linear(w, 2 * w), nn.ReLU(),
                                   nn.Linear(2 * w, 4 * w), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(8 * w, 2 * w), nn.ReLU(), nn.Linear(2 * w, p.feature_dim))

    def forward(self, xyz: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        h = self.local(xyz)
        g = h.amax(dim=1, keepdim=True).expand_as(h)
        return self.head(torch.cat([h, g], dim=-1))


# ---------------------------------------------------------------------------------------------------
# few-shot head and PCM
# ---------------------------------------------------------------------------------------------------

def masked_prototypes(support: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Prototypes ``(1 + n_way, C)``: row 0 = background (all support points outside their way's mask),
    row 1 + w = mean feature of way w's masked support points. ``support`` (n_way, k_shot, L, C),
    ``mask`` (n_way, k_shot, L) bool."""
    m = mask.float()[..., None]
    fg = (support * m).sum(dim=(1, 2)) / m.sum(dim=(1, 2)).clamp_min(1.0)
    bg = (support * (1 - m)).sum(dim=(0, 1, 2)) / (1 - m).sum().clamp_min(1.0)
    return torch.cat([bg[None], fg], dim=0)


def cosine_logits(query: torch.Tensor, protos: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale`` x cosine similarity of every query point to every prototype: ``query`` (Q, L, C) and
    ``protos`` (C_p, C) shared or (Q, C_p, C) per query scene -> (Q, L, C_p)."""
    q = F.normalize(query, dim=-1)
    pr = F.normalize(protos, dim=-1)
    if pr.dim() == 2:
        pr = pr[None].expand(q.shape[0], -1, -1)
    return scale * q @ pr.transpose(1, 2)


class PrototypeCompletion(nn.Module):
    """PCM: self-enhancement P <- P + MLP(P) (prototypes refined from one another's context through a
    shared MLP over [P_c, mean_c P]) and interactive enhancement P_q <- P + Attn(P, F_q) for each query
    scene q (prototypes gather the query scene's features, closing the support/query gap).
    ``protos`` (C_p, C), ``query`` (Q, L, C) -> (Q, C_p, C)."""

    def __init__(self, c: int):
        super().__init__()
        self.self_mlp = nn.Sequential(nn.Linear(2 * c, c), nn.ReLU(), nn.Linear(c, c))
        self.norm = nn.LayerNorm(c)
        self.q, self.k, self.v = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.out = nn.Linear(c, c)
        nn.init.zeros_(self.out.weight)                                  # starts as the identity map on P
        nn.init.zeros_(self.out.bias)

    def forward(self, protos: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        ctx = protos.mean(dim=0, keepdim=True).expand_as(protos)
        p = protos + self.self_mlp(torch.cat([protos, ctx], dim=-1))
        k, v = self.k(query), self.v(query)                              # (Q, L, C)
        q = self.q(self.norm(p))[None].expand(query.shape[0], -1, -1)    # (Q, C_p, C)
        attn = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return p[None] + self.out(attn @ v)


class FewShotSegmenter(nn.Module):
    """Encoder + prototypes (+ PCM) -> query logits (Q, L, 1 + n_way)."""

    def __init__(self, p: Params, encoder: nn.Module, use_pcm: bool):
        super().__init__()
        self.encoder = encoder
        self.pcm = PrototypeCompletion(p.feature_dim) if use_pcm else None
        self.scale = p.cosine_scale

    def forward(self, xyz: torch.Tensor, order: torch.Tensor, support_mask: torch.Tensor) -> torch.Tensor:
        """``xyz`` (n_way * k_shot + Q, L, 3): support scenes first (way-major), then queries;
        ``order`` (same, L) Morton permutations; ``support_mask`` (n_way, k_shot, L) bool."""
        n_way, k_shot, _ = support_mask.shape
        feats = self.encoder(xyz, order)
        support = feats[: n_way * k_shot].view(n_way, k_shot, *feats.shape[1:])
        query = feats[n_way * k_shot:]
        protos = masked_prototypes(support, support_mask)
        if self.pcm is not None:
            protos = self.pcm(protos, query)
        return cosine_logits(query, protos, self.scale)


def build_model(p: Params, arm: str) -> FewShotSegmenter:
    """The network of one arm of :data:`ARMS` (initialised from torch's global RNG; seed it outside)."""
    if arm == "protonet_pointnet":
        return FewShotSegmenter(p, PointNetEncoder(p), use_pcm=False)
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}")
    return FewShotSegmenter(p, DyPolySegEncoder(p, use_high_order=arm != "no_dyho"), use_pcm=arm != "no_pcm")


# ---------------------------------------------------------------------------------------------------
# data, training, evaluation
# ---------------------------------------------------------------------------------------------------

def make_data(p: Params, seed: int) -> dict[str, np.ndarray]:
    """One seed's data: a random split of the 12 shape classes into base (training) and novel (test)
    classes, training scenes and disjoint test scenes (points (S, n_points, 3), labels (S, n_points)),
    and each scene's Morton order (S, n_points)."""
    rng = numpy_rng(seed, 0)
    classes = rng.permutation(len(pc.SHAPES))
    base, novel = np.sort(classes[: p.n_base_classes]), np.sort(classes[p.n_base_classes:])
    kw = dict(n_objects=(p.min_objects, p.max_objects), noise=p.noise)
    train_xyz, train_lab = pc.make_scenes(numpy_rng(seed, 1), p.train_scenes, p.n_points, **kw)
    test_xyz, test_lab = pc.make_scenes(numpy_rng(seed, 2), p.test_scenes, p.n_points, **kw)
    return {"base": base, "novel": novel, "train_xyz": train_xyz, "train_lab": train_lab,
            "train_order": np.stack([pc.morton_order(x) for x in train_xyz]),
            "test_xyz": test_xyz, "test_lab": test_lab,
            "test_order": np.stack([pc.morton_order(x) for x in test_xyz])}


def episode_tensors(xyz: np.ndarray, order: np.ndarray, ep: dict[str, np.ndarray]):
    """Torch inputs of one episode: (xyz (S + Q, L, 3), order (S + Q, L), support_mask, query_target)."""
    scenes = np.concatenate([ep["support"].ravel(), ep["query"]])
    return (torch.from_numpy(xyz[scenes]), torch.from_numpy(order[scenes]),
            torch.from_numpy(ep["support_mask"]), torch.from_numpy(ep["query_target"]))


def train_model(p: Params, model: FewShotSegmenter, data: dict[str, np.ndarray], stream: int) -> list[float]:
    """Episodic training on the base classes (other classes' points are background): Adam on the
    query points' cross-entropy, ``p.train_episodes`` episodes from the episode stream ``stream``.
    Returns the loss per episode."""
    rng = numpy_rng(stream, 3)
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    model.train()
    losses = []
    for _ in range(p.train_episodes):
        ep = pc.few_shot_episode(data["train_lab"], data["base"], p.n_way, p.k_shot, p.n_query, rng)
        xyz, order, mask, target = episode_tensors(data["train_xyz"], data["train_order"], ep)
        loss = F.cross_entropy(model(xyz, order, mask).flatten(0, 1), target.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


def iou_counts(pred: np.ndarray, target: np.ndarray, ways: np.ndarray, n_classes: int) -> np.ndarray:
    """Per global class (rows 0..n_classes-1) the counts (TP, FP, FN) ``(n_classes, 3)`` of one episode's
    foreground ways: ``pred``, ``target`` (Q, L) in {0 = background, 1 + w}; ``ways`` (n_way,) global ids."""
    out = np.zeros((n_classes, 3), dtype=np.int64)
    for w, c in enumerate(ways):
        p_, t_ = pred == w + 1, target == w + 1
        out[c] += [np.sum(p_ & t_), np.sum(p_ & ~t_), np.sum(~p_ & t_)]
    return out


def miou(counts: np.ndarray, classes: np.ndarray) -> float:
    """Mean over ``classes`` of IoU = TP / (TP + FP + FN) from accumulated ``counts`` (n_classes, 3)."""
    tp, fp, fn = counts[classes].T
    return float(np.mean(tp / np.maximum(tp + fp + fn, 1)))


@torch.no_grad()
def evaluate(p: Params, model: FewShotSegmenter, data: dict[str, np.ndarray], seed: int) -> np.ndarray:
    """Accumulated (TP, FP, FN) per class ``(12, 3)`` over ``p.test_episodes`` novel-class episodes on the
    test scenes; the episodes depend on ``seed`` only, so every arm of a seed sees the same ones."""
    rng = numpy_rng(seed, 4)
    counts = np.zeros((len(pc.SHAPES), 3), dtype=np.int64)
    for _ in range(p.test_episodes):
        ep = pc.few_shot_episode(data["test_lab"], data["novel"], p.n_way, p.k_shot, p.n_query, rng)
        xyz, order, mask, target = episode_tensors(data["test_xyz"], data["test_order"], ep)
        pred = model(xyz, order, mask).argmax(dim=-1).numpy()
        counts += iou_counts(pred, target.numpy(), ep["ways"], len(pc.SHAPES))
    return counts


def run_arm(p: Params, seed: int, arm: str) -> dict:
    """Train and test one arm on one seed's data; returns {seed, arm, miou, per-class IoU, losses, time}.

    All arms of a seed share the data and test episodes; all but the replicate also share the training
    episode stream and the initialisation seed (the replicate draws both anew: a null comparison)."""
    with torch_single_thread():
        started = time.thread_time()
        data = make_data(p, seed)
        init, stream = (seed, seed) if arm != "dypolyseg_rep" else (seed + 100_003, seed + 100_003)
        with torch_seeded(init):
            model = build_model(p, arm)
        losses = train_model(p, model, data, stream)
        counts = evaluate(p, model, data, seed)
        tp, fp, fn = counts.T
        iou = tp / np.maximum(tp + fp + fn, 1)
        return {"seed": seed, "arm": arm, "miou": 100 * miou(counts, data["novel"]),
                "per_class": {pc.SHAPES[c]: float(100 * iou[c]) for c in data["novel"]},
                "loss_first": float(np.mean(losses[:20])), "loss_last": float(np.mean(losses[-20:])),
                "n_params": int(sum(t.numel() for t in model.parameters())),
                "cpu_s": time.thread_time() - started}
