"""VI-Net (Pelleriti, Zimmer, Wirth & Pokutta, ICML 2025) at digits scale: plain NumPy + PyTorch + scikit-learn.

Pipeline (the paper's three steps, on scikit-learn's 8x8 digits instead of CIFAR ResNets):

1. a "pretrained" 4-block CNN is trained on the digits, then truncated after conv block L; its latent
   (flattened) is reduced by PCA to k dims and min-max scaled to [-1, 1] (per dim, on the training set);
2. per class c, the Vanishing Component Analysis (VCA; Livni et al. 2013) computes generators G_c of
   the approximate vanishing ideal of the class-c training points: polynomials g with RMS_c(g) <= psi;
3. the polynomial layer maps z -> (|g(z)|)_{g in union_c G_c} (points of class c vanish on G_c, not on
   the others), and a logistic-regression head (the single linear layer) classifies those features.

Baselines: the full CNN; the truncated CNN + a linear head on the whole flattened latent (the plan's
"truncated + linear"); the ablation PCA-k + linear head (no polynomial layer); PCA-k + all degree-<=2
monomials + linear head (an explicit polynomial layer without vanishing ideals); and VI-Net with the
generators fitted on permuted labels (class manifolds destroyed, the same head), a negative control.

Randomness only through explicit seeds (the split, torch init and batches, the label permutation);
the heads are scikit-learn's deterministic lbfgs logistic regressions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from torch import nn

from flows.vi_net.params import Params
from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks.data import digits_pixels
from tasks.timing import interleaved_seconds
from tasks.train import torch_single_thread, train, warm_up_optimiser

N_CLASSES = 10


# ----------------------------------------------------------------------------------------------------
# VCA: approximate vanishing ideal of a point set (Livni, Lehavi, Schein, Nachlieli, Shalev-Shwartz,
# Globerson 2013), degree by degree.
# ----------------------------------------------------------------------------------------------------

@dataclass
class VCADegree:
    """One degree t of a fitted VCA, enough to evaluate its polynomials on new points.

    ``pairs`` (n_cand, 2): candidate j is F_1[:, a] * F_{t-1}[:, b] (None at t = 1: the coordinates);
    ``proj`` (n_F_before, n_cand): coefficients removing the span of the earlier non-vanishing F;
    ``keep`` (n_cand, n_F_t) and ``vanish`` (n_cand, n_V_t): the SVD's right singular vectors,
    ``keep`` divided by the RMS of its singular direction so every F has RMS 1 on the fitted points."""

    pairs: np.ndarray | None
    proj: np.ndarray
    keep: np.ndarray
    vanish: np.ndarray


@dataclass
class VCA:
    degrees: list[VCADegree] = field(default_factory=list)

    def evaluate(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(F, G) on points Z (n, d): the non-vanishing polynomials (n, n_F) and the generators (n, n_G)."""
        F_all = [np.ones((len(Z), 1))]
        F_one = F_prev = None
        G = []
        for t, deg in enumerate(self.degrees, start=1):
            cand = Z if t == 1 else F_one[:, deg.pairs[:, 0]] * F_prev[:, deg.pairs[:, 1]]
            C = cand - np.hstack(F_all) @ deg.proj
            F_t = C @ deg.keep
            G.append(C @ deg.vanish)
            F_all.append(F_t)
            F_prev = F_t
            if t == 1:
                F_one = F_t
        return np.hstack(F_all), np.hstack(G) if G else np.zeros((len(Z), 0))

    def n_parameters(self) -> int:
        """Stored coefficients needed to evaluate every generator (orthogonalisation + singular vectors)."""
        return int(sum(d.proj.size + d.keep.size + d.vanish.size for d in self.degrees))

    @property
    def n_generators(self) -> int:
        return int(sum(d.vanish.shape[1] for d in self.degrees))


def _candidate_pairs(n_one: int, n_prev: int, t: int) -> np.ndarray:
    """Index pairs (a, b) of the products F_1[a] * F_{t-1}[b]. At t = 2 both factors come from F_1, so only
    a <= b: f_a f_b and f_b f_a are the same polynomial, and keeping both would make the zero polynomial
    look like a 'vanishing' generator."""
    a, b = np.meshgrid(np.arange(n_one), np.arange(n_prev), indexing="ij")
    pairs = np.stack([a.ravel(), b.ravel()], axis=1)
    return pairs[pairs[:, 0] <= pairs[:, 1]] if t == 2 else pairs


def fit_vca(X: np.ndarray, psi: float, max_degree: int) -> VCA:
    """VCA on points X (m, d): generators g with RMS_X(g) = ||g(X)|| / sqrt(m) <= psi, degree <= max_degree.

    Each degree: candidates (degree 1: the coordinates; degree t: products of F_1 and F_{t-1}), minus their
    projection on the span of all earlier non-vanishing polynomials F, then an SVD C = U S W^T. A right
    singular vector w with S / sqrt(m) <= psi gives a generator C w (unit-norm coefficients over the
    candidates); the others give new F (rescaled to RMS 1, which keeps degree-t products at scale O(1))."""
    m = len(X)
    vca = VCA()
    F_all = [np.ones((m, 1))]
    F_one = F_prev = None
    for t in range(1, max_degree + 1):
        if t == 1:
            pairs, cand = None, X
        else:
            if F_one.shape[1] == 0 or F_prev.shape[1] == 0:
                break
            pairs = _candidate_pairs(F_one.shape[1], F_prev.shape[1], t)
            cand = F_one[:, pairs[:, 0]] * F_prev[:, pairs[:, 1]]
        F = np.hstack(F_all)                           # (m, n_F), orthogonal columns of norm sqrt(m)
        proj = F.T @ cand / m                          # least squares on orthogonal columns
        C = cand - F @ proj
        _, S, Wt = np.linalg.svd(C, full_matrices=True)
        rms = np.zeros(Wt.shape[0])                    # right singular directions beyond rank(m) have S = 0
        rms[:S.size] = S / np.sqrt(m)
        vanishing = rms <= psi
        keep = Wt[~vanishing].T / rms[~vanishing]
        vca.degrees.append(VCADegree(pairs, proj, keep, Wt[vanishing].T))
        F_t = C @ keep
        F_all.append(F_t)
        F_prev = F_t
        if t == 1:
            F_one = F_t
    return vca


def fit_class_ideals(Z: np.ndarray, y: np.ndarray, psi: float, max_degree: int) -> list[VCA]:
    """One VCA per class on the class's points: Z (n, k), labels y (n,) in 0..9."""
    return [fit_vca(Z[y == c], psi, max_degree) for c in range(N_CLASSES)]


def vanishing_features(ideals: list[VCA], Z: np.ndarray) -> np.ndarray:
    """The polynomial layer: |g(z)| for every generator of every class, shape (n, sum_c |G_c|); one
    constant 0 column if no class has a generator (the head then predicts the class priors)."""
    G = np.hstack([np.abs(v.evaluate(Z)[1]) for v in ideals])
    return G if G.shape[1] else np.zeros((len(Z), 1))


# ----------------------------------------------------------------------------------------------------
# The "pretrained" network: a 4-block CNN on 8x8 digits, truncatable after any block.
# ----------------------------------------------------------------------------------------------------

class DigitsCNN(nn.Module):
    """Blocks: conv3x3+ReLU (8x8); conv+ReLU+pool (4x4); conv+ReLU+pool (2x2); conv+ReLU (2x2); then
    flatten -> dense(hidden) -> ReLU -> dense(10). Input (n, 1, 8, 8), output logits (n, 10)."""

    def __init__(self, channels: list[int], hidden: int):
        super().__init__()
        c1, c2, c3, c4 = channels
        conv = lambda a, b: nn.Conv2d(a, b, 3, padding=1)  # noqa: E731
        self.blocks = nn.ModuleList([
            nn.Sequential(conv(1, c1), nn.ReLU()),
            nn.Sequential(conv(c1, c2), nn.ReLU(), nn.MaxPool2d(2)),
            nn.Sequential(conv(c2, c3), nn.ReLU(), nn.MaxPool2d(2)),
            nn.Sequential(conv(c3, c4), nn.ReLU()),
        ])
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * c4, hidden), nn.ReLU(), nn.Linear(hidden, N_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    @torch.no_grad()
    def latent(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """The truncated network: the flattened output of conv block ``layer`` (1-based), shape (n, C*H*W)."""
        for block in self.blocks[:layer]:
            x = block(x)
        return x.flatten(1)

    def n_parameters(self, layer: int | None = None) -> int:
        """All parameters, or those of the first ``layer`` blocks (the truncated network)."""
        modules = self if layer is None else self.blocks[:layer]
        return int(sum(p.numel() for p in modules.parameters()))


def digits_split(p: Params, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified split of the digits: X (n, 1, 8, 8) float32 in [-1, 1], y (n,)."""
    X, y = digits_pixels()
    X = X.reshape(-1, 1, 8, 8).astype(np.float32)
    rs = int(numpy_rng(seed, 0).integers(2**31))
    return train_test_split(X, y, test_size=p.test_fraction, stratify=y, random_state=rs)


def train_cnn(p: Params, X: np.ndarray, y: np.ndarray, seed: int) -> DigitsCNN:
    """Adam on cross-entropy, initialisation and batches from ``seed``."""
    warm_up_optimiser()
    with torch_seeded(seed):
        model = DigitsCNN(p.channels, p.hidden)
    train(model, torch.from_numpy(X), torch.from_numpy(y).long(), loss_fn=nn.functional.cross_entropy,
          epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed)
    return model


# ----------------------------------------------------------------------------------------------------
# VI-Net: truncated CNN -> PCA -> [-1, 1] scaling -> |generators| -> linear head.
# ----------------------------------------------------------------------------------------------------

def linear_head(p: Params, features: np.ndarray, y: np.ndarray) -> tuple[StandardScaler, LogisticRegression]:
    """Standardise then multinomial logistic regression; the scaler folds into the linear layer."""
    scaler = StandardScaler().fit(features)
    head = LogisticRegression(C=p.head_c, max_iter=3000).fit(scaler.transform(features), y)
    return scaler, head


def head_parameters(n_features: int) -> int:
    return n_features * N_CLASSES + N_CLASSES


@dataclass
class VINet:
    """A fitted VI-Net: the truncated CNN's first ``layer`` blocks, then NumPy from the latent on."""

    cnn: DigitsCNN
    layer: int
    pca: PCA
    low: np.ndarray           # (k,) per-dim minimum of the training PCA scores
    high: np.ndarray          # (k,) per-dim maximum
    ideals: list[VCA]
    scaler: StandardScaler
    head: LogisticRegression

    def embed(self, latent: np.ndarray) -> np.ndarray:
        """Latent (n, D) -> PCA scores min-max scaled to [-1, 1] on the training set, shape (n, k): one
        affine map (PCA centring, projection and scaling folded together)."""
        width = 2.0 / (self.high - self.low)
        return latent @ (self.pca.components_.T * width) + (-self.pca.mean_ @ self.pca.components_.T - self.low) * width - 1.0

    def logits(self, X: torch.Tensor) -> np.ndarray:
        """Images (n, 1, 8, 8) -> class scores (n, 10): the whole pipeline, as timed. The head's
        standardisation is folded into its weights (plain matmuls, no scikit-learn call overhead)."""
        Z = self.embed(self.cnn.latent(X, self.layer).numpy().astype(np.float64))
        W = self.head.coef_ / self.scaler.scale_
        b = self.head.intercept_ - W @ self.scaler.mean_
        return vanishing_features(self.ideals, Z) @ W.T + b

    def n_parameters(self) -> int:
        k, D = self.pca.components_.shape
        poly = sum(v.n_parameters() for v in self.ideals)
        return self.cnn.n_parameters(self.layer) + k * D + D + 2 * k + poly + head_parameters(max(self.n_generators, 1))

    @property
    def n_generators(self) -> int:
        return int(sum(v.n_generators for v in self.ideals))


def fit_vinet(p: Params, cnn: DigitsCNN, layer: int, latent: np.ndarray, y: np.ndarray,
              ideal_labels: np.ndarray | None = None) -> VINet:
    """Fit PCA, scaling, per-class VCA (on ``ideal_labels``, the true labels unless a control permutes
    them) and the head (always on the true labels) from the training latent (n, D)."""
    pca = PCA(n_components=p.pca_dim, svd_solver="full").fit(latent)
    scores = pca.transform(latent)
    low, high = scores.min(0), scores.max(0)
    net = VINet(cnn, layer, pca, low, high, [], None, None)
    Z = net.embed(latent)
    net.ideals = fit_class_ideals(Z, y if ideal_labels is None else ideal_labels, p.psi, p.max_degree)
    net.scaler, net.head = linear_head(p, vanishing_features(net.ideals, Z), y)
    return net


def vanishing_profile(net: VINet, latent: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """How well each class's generators vanish: RMS of every generator of class c on class-c points
    ("own") and on the other classes' points ("other"); worst own RMS, median own and other RMS, and
    the share of generators whose RMS on the other classes exceeds their RMS on their own class."""
    Z = net.embed(latent)
    own, other = [], []
    for c, v in enumerate(net.ideals):
        G = v.evaluate(Z)[1]
        if G.shape[1] == 0:
            continue
        own.append(np.sqrt((G[y == c] ** 2).mean(0)))
        other.append(np.sqrt((G[y != c] ** 2).mean(0)))
    own, other = np.concatenate(own), np.concatenate(other)
    return {"own_rms_max": float(own.max()), "own_rms_median": float(np.median(own)),
            "other_rms_median": float(np.median(other)), "share_other_gt_own": float(np.mean(other > own))}


def accuracy(scores: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(scores, axis=1) == y))


def run_seed(p: Params, seed: int) -> dict:
    """One seed: train the CNN, then for every truncation L the VI-Net and the baselines. Returns
    ``rows`` (one dict per (layer, method): accuracy, parameters, layers), ``profiles`` (vanishing
    diagnostics per layer) and ``models`` (the full CNN and the headline VI-Net, for the timing)."""
    with torch_single_thread():
        X_tr, X_te, y_tr, y_te = digits_split(p, seed)
        cnn = train_cnn(p, X_tr, y_tr, seed)
        Xtr_t, Xte_t = torch.from_numpy(X_tr), torch.from_numpy(X_te)
        with torch.no_grad():
            full_acc = accuracy(cnn(Xte_t).numpy(), y_te)
        rows = [{"seed": seed, "layer": 0, "method": "full", "accuracy": full_acc,
                 "parameters": cnn.n_parameters(), "weight_layers": 6, "generators": 0}]
        profiles, headline = {}, None
        permuted = numpy_rng(seed, 1).permutation(y_tr)
        for layer in p.layers:
            L_tr = cnn.latent(Xtr_t, layer).numpy().astype(np.float64)
            L_te = cnn.latent(Xte_t, layer).numpy().astype(np.float64)
            trunc = cnn.n_parameters(layer)
            net = fit_vinet(p, cnn, layer, L_tr, y_tr)
            ctrl = fit_vinet(p, cnn, layer, L_tr, y_tr, ideal_labels=permuted)
            row = dict(seed=seed, layer=layer)
            # VI-Net weight layers: the truncated convs, the polynomial layer (PCA + scaling fold into it), the head
            rows.append({**row, "method": "vinet", "accuracy": accuracy(net.logits(Xte_t), y_te),
                         "parameters": net.n_parameters(), "weight_layers": layer + 2, "generators": net.n_generators})
            rows.append({**row, "method": "vinet_permuted", "accuracy": accuracy(ctrl.logits(Xte_t), y_te),
                         "parameters": ctrl.n_parameters(), "weight_layers": layer + 2, "generators": ctrl.n_generators})
            # truncated + linear head on the whole flattened latent
            sc, hd = linear_head(p, L_tr, y_tr)
            rows.append({**row, "method": "trunc_linear", "accuracy": accuracy(hd.decision_function(sc.transform(L_te)), y_te),
                         "parameters": trunc + head_parameters(L_tr.shape[1]), "weight_layers": layer + 1, "generators": 0})
            # ablation: the same [-1, 1] PCA scores, linear head, no polynomial layer
            Z_tr, Z_te = net.embed(L_tr), net.embed(L_te)
            sc, hd = linear_head(p, Z_tr, y_tr)
            k, D = net.pca.components_.shape
            rows.append({**row, "method": "pca_linear", "accuracy": accuracy(hd.decision_function(sc.transform(Z_te)), y_te),
                         "parameters": trunc + k * D + D + 2 * k + head_parameters(k), "weight_layers": layer + 2,
                         "generators": 0})
            # explicit polynomial layer: all monomials of degree <= max_degree of the PCA scores
            poly = PolynomialFeatures(p.max_degree, include_bias=False).fit(Z_tr)
            sc, hd = linear_head(p, poly.transform(Z_tr), y_tr)
            n_mono = poly.n_output_features_
            rows.append({**row, "method": "pca_monomials", "accuracy": accuracy(hd.decision_function(sc.transform(poly.transform(Z_te))), y_te),
                         "parameters": trunc + k * D + D + 2 * k + head_parameters(n_mono), "weight_layers": layer + 2,
                         "generators": 0})
            # parameter control: the explicit degree-<=max_degree layer on the whole latent (no PCA, no
            # vanishing ideal); only counted: every monomial of D variables needs one weight per class
            n_full_mono = int(PolynomialFeatures(p.max_degree, include_bias=False).fit(L_tr[:2]).n_output_features_)
            rows.append({**row, "method": "latent_monomials", "accuracy": float("nan"),
                         "parameters": trunc + head_parameters(n_full_mono), "weight_layers": layer + 1, "generators": 0})
            profiles[layer] = vanishing_profile(net, L_te, y_te) | {
                f"train_{k_}": v for k_, v in vanishing_profile(net, L_tr, y_tr).items()}
            if headline is None:
                headline = net
    return {"rows": rows, "profiles": profiles, "models": {"full": cnn, "vinet": headline}, "test_images": X_te}


def time_models(p: Params, seed_outputs: list[dict]) -> list[dict[str, float]]:
    """Throughput (images/s, batch ``p.throughput_batch``, one thread) of the full CNN, the headline VI-Net,
    and the full CNN again (the control: the same model timed twice), per seed: the batch size over the median
    CPU seconds of ``p.throughput_reps`` rounds, each round one call of every model in a random order, after
    one untimed round (:func:`tasks.timing.interleaved_seconds`), so load drift reaches the three alike."""
    rows = []
    with torch_single_thread():
        for position, out in enumerate(seed_outputs):   # the round order is drawn from the seed's position
            images = torch.from_numpy(out["test_images"])
            X = images[torch.arange(p.throughput_batch) % len(images)]
            full, vinet = out["models"]["full"], out["models"]["vinet"]

            @torch.no_grad()
            def run_full():
                return full(X).numpy()

            seconds = interleaved_seconds({"full": run_full, "vinet": lambda: vinet.logits(X), "full_rerun": run_full},
                                          p.throughput_reps, order=np.random.default_rng(position))
            rows.append({name: len(X) / float(np.median(s)) for name, s in seconds.items()})
    return rows
