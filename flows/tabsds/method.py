"""TabSDS (Chaibub Neto, ICML 2025): model-free synthetic tables by rank matching and data shuffling.

Read top to bottom:

1. data        -- four bundled tables (breast_cancer, wine, diabetes from scikit-learn; statsmodels' ``fair``,
                  mixed types) with a spec of numeric / categorical columns, the target and the task;
2. TabSDS      -- the official algorithm (``echaibub/TabSDS``, ``utility_functions_syn_tab_sjppds_for_icml_2025.py``):
                  equal-width binning of the *last* column, JPPDS (permute the other columns' rows within each
                  bin, then shuffle rows), sequential JPPDS (p rounds, rotating first column -> last),
                  IOS marginals (uniform draws between paired order statistics of two disjoint halves),
                  rank matching, and the categorical <-> numeric rank encoding for mixed tables;
3. baselines   -- Gaussian copula (``copulas``), CTGAN and TVAE (``ctgan``), adversarial random forests
                  (``arfpy``), a compact TabDDPM (Gaussian + multinomial diffusion, our own), independent
                  marginals and the row bootstrap as references;
4. metrics     -- fidelity (per-column KS / TV, correlation-matrix error, energy distance via
                  ``tasks.two_sample``, random-forest detection AUC), utility (train on synthetic, test on real,
                  vs train on real), privacy (distance to closest record, exact-copy rate);
5. one unit    -- ``run_unit(p, dataset, seed)``: split 50/50, every generator, every metric, timings.

No Prefect, no DVC. TabSDS, TabDDPM and the metrics draw from explicit generators; the library
baselines (copulas, ctgan, arfpy) draw from NumPy's / torch's global generators, so they run one at a
time under a lock that seeds those generators and restores them afterwards (same seed -> same table).
Their clock starts once the lock is held: waiting for another seed's baseline is not their run time.
"""

from __future__ import annotations

import contextlib
import io
import time
import types
import warnings
from pathlib import Path
from typing import get_args

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import accuracy_score, r2_score, roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import QuantileTransformer
from torch import nn

from flows.tabsds.params import Params, Table
from paperflows.core.seeding import global_rngs_seeded, torch_generator, torch_seeded
from tasks.data import load_bundled, save_parquet
from tasks.diffusion import TimeConditionedMLP, ddpm_schedule
from tasks.train import torch_single_thread, warm_up_optimiser
from tasks.two_sample import energy_distance, pairwise_distances

DATASETS = get_args(Table)
GENERATORS = ("tabsds", "gaussian_copula", "ctgan", "tvae", "arf", "tabddpm", "marginals", "bootstrap")
BASELINES = ("gaussian_copula", "ctgan", "tvae", "arf", "tabddpm")   # run on the first ``baseline_seeds`` seeds
REFERENCES = ("marginals", "bootstrap")                               # cheap: every seed, like TabSDS
LIBRARY = ("gaussian_copula", "ctgan", "tvae", "arf")                 # global RNGs: run under ``global_rng``
CONTROL = "jittered_copy"   # negative control of the competitive claim: every seed, whatever ``p.baselines``

# ---------------------------------------------------------------------------------------------- 1. data


def load_table(name: str, fair_rows: int = 2000) -> tuple[pd.DataFrame, dict]:
    """A bundled table (features and target as columns) and its spec.

    Categorical columns hold integer codes 0..K-1 (``spec["levels"][col] = K``); numeric columns float64.
    ``fair``: statsmodels' affairs survey (6,366 rows), target ``had_affair = affairs > 0`` (the
    continuous ``affairs`` is dropped), subsampled to ``fair_rows`` rows with a fixed generator.
    """
    if name in ("breast_cancer", "wine", "diabetes"):
        X, y = load_bundled(name)
        frame = X.astype(float)
        num_cols = list(frame.columns)
        cat_cols: list[str] = []
        if name == "diabetes":       # 'sex' takes two values: a categorical column
            frame["sex"] = (frame["sex"] > frame["sex"].mean()).astype(np.int64)
            num_cols.remove("sex")
            cat_cols.append("sex")
            frame["target"] = y.to_numpy(float)
            num_cols.append("target")
            task = "regression"
        else:
            frame["target"] = y.to_numpy(np.int64)
            cat_cols.append("target")
            task = "classification"
    elif name == "fair":
        import statsmodels.api as sm
        raw = sm.datasets.fair.load_pandas().data
        raw = raw.iloc[np.sort(np.random.default_rng(0).choice(len(raw), min(fair_rows, len(raw)), replace=False))]
        frame = pd.DataFrame(index=range(len(raw)))
        num_cols = ["age", "yrs_married", "children", "educ"]
        cat_cols = ["rate_marriage", "religious", "occupation", "occupation_husb", "target"]
        for c in num_cols:
            frame[c] = raw[c].to_numpy(float)
        for c in cat_cols[:-1]:
            frame[c] = np.unique(raw[c].to_numpy(), return_inverse=True)[1].astype(np.int64)
        frame["target"] = (raw["affairs"].to_numpy() > 0).astype(np.int64)
        task = "classification"
    else:
        raise ValueError(f"unknown dataset '{name}'; choose one of {DATASETS}")
    frame = frame.reset_index(drop=True)
    spec = {"name": name, "num_cols": num_cols, "cat_cols": cat_cols, "target": "target", "task": task,
            "levels": {c: int(frame[c].max()) + 1 for c in cat_cols}, "columns": list(frame.columns)}
    return frame, spec


def split_half(frame: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper's split: a random half for training, the other half (same size) held out."""
    order = np.random.default_rng([seed, 11]).permutation(len(frame))
    half = len(frame) // 2
    return frame.iloc[order[:half]].reset_index(drop=True), frame.iloc[order[half:2 * half]].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------- 2. TabSDS


def equal_width_bins(x: np.ndarray, n_levels: int) -> np.ndarray:
    """``pd.cut(x, bins=n_levels)`` codes 0..n_levels-1: equal-width, right-closed bins over [min, max]."""
    lo, hi = float(np.min(x)), float(np.max(x))
    if hi == lo:
        return np.zeros(len(x), dtype=np.int64)
    edges = np.linspace(lo, hi, n_levels + 1)
    return np.clip(np.searchsorted(edges, x, side="left") - 1, 0, n_levels - 1).astype(np.int64)


def jppds(data: np.ndarray, n_levels: int, rng: np.random.Generator) -> np.ndarray:
    """One 'simple' joint-probability-preserving data shuffle (paper's Algorithm 7), shape (n, p) -> (n, p).

    The last column is cut into ``n_levels`` equal-width bins; within each bin the rows of the other
    p-1 columns are permuted (as whole row-blocks); then all rows are shuffled.
    """
    n = len(data)
    bins = equal_width_bins(data[:, -1], n_levels)
    rows_by_bin = np.argsort(bins, kind="stable")            # each bin's rows, in row order
    shuffled_by_bin = np.lexsort((rng.random(n), bins))        # each bin's rows, in random order
    out = data.copy()
    out[rows_by_bin, :-1] = data[shuffled_by_bin, :-1]
    return out[rng.permutation(n)]


def sequential_jppds(data: np.ndarray, n_levels: int, rng: np.random.Generator) -> np.ndarray:
    """Sequential JPPDS (Algorithm 6), shape (n, p) -> (n, p): p shuffles, each conditioning on a
    different column (the first column is rotated to the end between rounds); column order restored."""
    out = jppds(data, n_levels, rng)
    for _ in range(1, data.shape[1]):
        out = jppds(np.roll(out, -1, axis=1), n_levels, rng)
    return np.roll(out, -1, axis=1)


def ios_sample(x: np.ndarray, rng: np.random.Generator, n_prop: float = 0.5) -> np.ndarray:
    """Interpolated order-statistics sampling (Algorithm 9), shape (n,) -> (n,).

    Repeatedly draw two disjoint random subsets of size floor(n * n_prop), sort both, and draw
    uniformly between the paired order statistics; pool the draws and keep n of them at random.
    """
    x = np.asarray(x, dtype=float)
    n = len(x)
    m = int(np.floor(n * n_prop))
    draws = []
    for _ in range(int(np.ceil(n / m))):
        order = rng.permutation(n)
        a, b = np.sort(x[order[:m]]), np.sort(x[order[m:2 * m]])
        draws.append(rng.uniform(np.minimum(a, b), np.maximum(a, b)))
    pooled = np.concatenate(draws)
    return pooled[rng.choice(len(pooled), n, replace=False)]


def ranks_random_ties(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ordinal ranks 0..n-1 of ``x`` (shape (n,)) with ties broken at random."""
    order = np.lexsort((rng.random(len(x)), x))
    ranks = np.empty(len(x), dtype=np.int64)
    ranks[order] = np.arange(len(x))
    return ranks


def match_ranks(marginals: np.ndarray, shuffled: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rank matching (Algorithm 10), shapes (n, q), (n, q) -> (n, q): column j of the output holds the
    sorted ``marginals[:, j]`` re-ordered by the (random-tie) ranks of ``shuffled[:, j]``."""
    out = np.empty_like(marginals, dtype=float)
    for j in range(marginals.shape[1]):
        out[:, j] = np.sort(marginals[:, j])[ranks_random_ties(shuffled[:, j], rng)]
    return out


def categorical_to_numeric(codes: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray]]:
    """Algorithm 11, shape (n, c) -> (n, c) floats: level k of a column (levels in sorted order) owns the
    integer range (cum_k, cum_{k+1}] of its counts, and its rows get a random permutation of that range.
    Returns the encodings and, per column, the upper bounds of the ranges (with the sorted levels)."""
    out = np.empty(codes.shape, dtype=float)
    bounds = []
    for j in range(codes.shape[1]):
        levels, inverse, counts = np.unique(codes[:, j], return_inverse=True, return_counts=True)
        upper = np.cumsum(counts)
        for k in range(len(levels)):
            rows = np.flatnonzero(inverse == k)
            out[rows, j] = upper[k] - counts[k] + 1 + rng.permutation(counts[k])
        bounds.append(np.stack([levels, upper]))
    return out, bounds


def numeric_to_categorical(encoded: np.ndarray, bounds: list[np.ndarray]) -> np.ndarray:
    """Algorithm 12: map each encoding back to the level whose integer range holds it, shape (n, c)."""
    out = np.empty(encoded.shape, dtype=np.int64)
    for j, (levels, upper) in enumerate(bounds):
        out[:, j] = levels[np.searchsorted(upper, encoded[:, j], side="left")]
    return out


def tabsds(frame: pd.DataFrame, spec: dict, n_levels: int, seed: int, n_prop: float = 0.5) -> pd.DataFrame:
    """TabSDS (Algorithm 1; mixed data = Algorithm 5): a synthetic table with the rows of ``frame``.

    Numeric columns and the rank encodings of the categorical ones are shuffled jointly by sequential
    JPPDS; numeric columns then take IOS-sampled values placed by rank matching; categorical encodings
    are mapped back to their levels (so categorical counts are kept exactly).
    """
    rng = np.random.default_rng([seed, 1])
    num, cat = spec["num_cols"], spec["cat_cols"]
    encoded, bounds = categorical_to_numeric(frame[cat].to_numpy(), rng) if cat else (np.empty((len(frame), 0)), [])
    shuffled = sequential_jppds(np.hstack([frame[num].to_numpy(float), encoded]), n_levels, rng)
    out = pd.DataFrame(index=range(len(frame)))
    if num:
        marginals = np.column_stack([ios_sample(frame[c].to_numpy(float), rng, n_prop) for c in num])
        out[num] = match_ranks(marginals, shuffled[:, :len(num)], rng)
    if cat:
        out[cat] = numeric_to_categorical(shuffled[:, len(num):], bounds)
    return out[spec["columns"]]


# ---------------------------------------------------------------------------------------------- 3. baselines

@contextlib.contextmanager
def global_rng(seed: int):
    """Seed NumPy's and torch's global generators for a library that only uses them; one caller at a
    time, previous states restored afterwards (seeds run in threads)."""
    with global_rngs_seeded(seed), torch_single_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _valid_codes(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    """Round and clip categorical columns to valid integer codes; numeric columns to float."""
    out = frame[spec["columns"]].copy()
    for c in spec["cat_cols"]:
        out[c] = np.clip(np.rint(pd.to_numeric(out[c], errors="coerce").fillna(0).to_numpy(float)),
                         0, spec["levels"][c] - 1).astype(np.int64)
    for c in spec["num_cols"]:
        out[c] = pd.to_numeric(out[c], errors="coerce").to_numpy(float)
    return out.reset_index(drop=True)


COPULA_MARGINALS = {"univariate": "copulas.univariate.Univariate",          # library default: best KS fit
                    "truncated_gaussian": "copulas.univariate.TruncatedGaussian",
                    "beta": "copulas.univariate.BetaUnivariate"}               # SDV's default


def gaussian_copula(frame: pd.DataFrame, spec: dict, n: int, seed: int, marginal: str = "univariate") -> pd.DataFrame:
    """(Call under ``global_rng(seed)``, as :func:`generate` does.) ``copulas.multivariate.GaussianMultivariate`` with the ``marginal`` family of ``COPULA_MARGINALS``;
    categorical codes are modelled as numbers and rounded back to valid codes."""
    from copulas.multivariate import GaussianMultivariate
    model = GaussianMultivariate(distribution=COPULA_MARGINALS[marginal], random_state=seed)
    model.fit(frame.astype(float))
    return _valid_codes(model.sample(n), spec)


def ctgan_like(kind: str, frame: pd.DataFrame, spec: dict, n: int, seed: int, epochs: int) -> pd.DataFrame:
    """CTGAN or TVAE from the ``ctgan`` package (library defaults except ``epochs``; CPU); call under ``global_rng``."""
    from ctgan import CTGAN, TVAE
    model = CTGAN(epochs=epochs, verbose=False, enable_gpu=False) if kind == "ctgan" else TVAE(epochs=epochs, enable_gpu=False)
    model.set_random_state(seed)
    model.fit(frame, discrete_columns=list(spec["cat_cols"]))
    return _valid_codes(model.sample(n), spec)


def _arfpy_module():
    """arfpy 0.1.1 calls ``np.in1d`` (removed in NumPy 2.4): give its module a NumPy view that has it."""
    from arfpy import arf as arf_module
    if not hasattr(arf_module.np, "in1d"):
        shim = types.ModuleType("numpy_with_in1d")
        shim.__dict__.update(np.__dict__)
        shim.in1d = np.isin
        arf_module.np = shim
    return arf_module


def adversarial_rf(frame: pd.DataFrame, spec: dict, n: int, seed: int, num_trees: int) -> pd.DataFrame:
    """Adversarial random forests + FORDE/FORGE density estimation and sampling (``arfpy``); call under ``global_rng``."""
    arf_module = _arfpy_module()
    x = frame[spec["columns"]].copy()
    for c in spec["cat_cols"]:
        x[c] = x[c].astype("category")
    # arfpy indexes its per-column Series by position, which pandas 3 reads as a label: integer labels.
    x.columns = range(x.shape[1])
    with contextlib.redirect_stdout(io.StringIO()):
        model = arf_module.arf(x=x, num_trees=num_trees, verbose=False, random_state=seed)
        model.forde()
        out = model.forge(n=n)
    out.columns = spec["columns"]
    for c in spec["cat_cols"]:
        out[c] = out[c].astype(np.int64)
    return _valid_codes(out, spec)


def independent_marginals(frame: pd.DataFrame, spec: dict, n: int, seed: int) -> pd.DataFrame:
    """Reference: every column resampled on its own (with replacement) -- right marginals, no dependence."""
    rng = np.random.default_rng([seed, 2])
    return pd.DataFrame({c: frame[c].to_numpy()[rng.integers(0, len(frame), n)] for c in spec["columns"]})


def row_bootstrap(frame: pd.DataFrame, spec: dict, n: int, seed: int) -> pd.DataFrame:
    """Reference: real rows resampled with replacement -- perfect fidelity, no privacy."""
    return frame.iloc[np.random.default_rng([seed, 3]).integers(0, len(frame), n)].reset_index(drop=True)


def jittered_copies(frame: pd.DataFrame, spec: dict, n: int, seed: int, scale: float) -> pd.DataFrame:
    """Negative control, a near-memoriser: the training rows (drawn with replacement) plus Gaussian noise of
    ``scale`` times each numeric column's standard deviation; categorical columns copied. No row is an exact
    copy, and held-out-based detection cannot tell it from real data, yet it is the training table."""
    rng = np.random.default_rng([seed, 6])
    out = frame.iloc[rng.integers(0, len(frame), n)].reset_index(drop=True)
    for c in spec["num_cols"]:
        out[c] = out[c].to_numpy(float) + rng.normal(0.0, scale * (frame[c].std() or 1.0), n)
    return out[spec["columns"]]


# --- compact TabDDPM: Gaussian diffusion on quantile-normalised numerics, multinomial diffusion on categoricals


_Q_CLIP = 5.2   # |N(0,1) quantiles| that QuantileTransformer(output_distribution="normal") can produce


def _cat_posterior(xt: torch.Tensor, x0: torch.Tensor, alpha: torch.Tensor, abar_prev: torch.Tensor,
                   sizes: list[int]) -> torch.Tensor:
    """q(x_{t-1} | x_t, x_0) of multinomial diffusion, per categorical block (probabilities, shape (b, sum K))."""
    out, start = [], 0
    for K in sizes:
        a = alpha[:, None] * xt[:, start:start + K] + (1 - alpha[:, None]) / K
        b = abar_prev[:, None] * x0[:, start:start + K] + (1 - abar_prev[:, None]) / K
        p = a * b
        out.append(p / p.sum(1, keepdim=True))
        start += K
    return torch.cat(out, 1) if out else xt


def tabddpm(frame: pd.DataFrame, spec: dict, n: int, seed: int, steps: int, timesteps: int,
            hidden: int = 128, batch_size: int = 256, lr: float = 2e-3) -> pd.DataFrame:
    """A compact TabDDPM (Kotelnikov et al. 2023): numerics quantile-normalised to N(0,1) and diffused
    with Gaussian noise (epsilon prediction, MSE); categoricals one-hot and diffused by multinomial
    diffusion (x_0 prediction, KL between posteriors); one MLP denoiser, cosine schedule, Adam.

    The Gaussian half is the shared toolkit's (``tasks.diffusion``: schedule, network, forward noising,
    Tweedie estimate and posterior mean, steps t = 1..T); the multinomial half is TabDDPM's own."""
    num, cat = spec["num_cols"], spec["cat_cols"]
    sizes = [spec["levels"][c] for c in cat]
    qt = QuantileTransformer(output_distribution="normal", n_quantiles=min(1000, len(frame)), random_state=seed)
    x_num = (torch.tensor(qt.fit_transform(frame[num].to_numpy(float)), dtype=torch.float32) if num
             else torch.zeros(len(frame), 0))
    x_cat = (torch.cat([nn.functional.one_hot(torch.tensor(frame[c].to_numpy()), K).float()
                        for c, K in zip(cat, sizes)], 1) if cat else torch.zeros(len(frame), 0))
    d_num, d_cat = x_num.shape[1], x_cat.shape[1]
    schedule = ddpm_schedule(timesteps, "cosine")
    abar = schedule.alpha_bars.float()              # index t - 1 holds step t
    abar_prev = torch.cat([torch.ones(1), abar[:-1]])
    alpha = schedule.alphas.float()
    g = torch_generator(seed)
    with torch_single_thread():
        with torch_seeded(seed):
            model = TimeConditionedMLP(d_num + d_cat, width=hidden, depth=3)
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-5)
        for _ in range(steps):
            idx = torch.randint(0, len(frame), (min(batch_size, len(frame)),), generator=g)
            t = torch.randint(1, timesteps + 1, (len(idx),), generator=g)
            eps = torch.randn(len(idx), d_num, generator=g)
            xn_t = schedule.add_noise(x_num[idx], eps, t)
            a_t = abar[t - 1][:, None]
            xc_t = _sample_blocks(a_t * x_cat[idx] + (1 - a_t) * _uniform(sizes, len(idx)), sizes, g)
            out = model(torch.cat([xn_t, xc_t], 1), t.float())
            loss = ((out[:, :d_num] - eps) ** 2).mean() if d_num else torch.zeros(())
            if d_cat:
                x0_hat = _block_softmax(out[:, d_num:], sizes)
                q = _cat_posterior(xc_t, x_cat[idx], alpha[t - 1], abar_prev[t - 1], sizes)
                p = _cat_posterior(xc_t, x0_hat, alpha[t - 1], abar_prev[t - 1], sizes)
                kl = (q * (torch.log(q + 1e-12) - torch.log(p + 1e-12))).sum(1)
                nll = -(x_cat[idx] * torch.log(x0_hat + 1e-12)).sum(1)     # decoder term at the last step
                loss = loss + torch.where(t == 1, nll, kl).mean() / len(sizes)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            xn = torch.randn(n, d_num, generator=g)
            xc = _sample_blocks(_uniform(sizes, n), sizes, g)
            for step in range(timesteps, 0, -1):
                out = model(torch.cat([xn, xc], 1), torch.full((n,), float(step)))
                if d_num:   # x_0 from the predicted noise, clipped to the quantile range, then the posterior mean
                    x0_hat = schedule.predict_x0(xn, out[:, :d_num], step).clamp(-_Q_CLIP, _Q_CLIP)
                    xn = schedule.posterior_mean(xn, x0_hat, step)
                    if step > 1:
                        xn = xn + schedule.transition_std(step) * torch.randn(n, d_num, generator=g)
                if d_cat:
                    x0_hat = _block_softmax(out[:, d_num:], sizes)
                    rows = torch.full((n,), step - 1)
                    probs = x0_hat if step == 1 else _cat_posterior(xc, x0_hat, alpha[rows], abar_prev[rows], sizes)
                    xc = _sample_blocks(probs, sizes, g)
    result = pd.DataFrame(index=range(n))
    if num:
        result[num] = qt.inverse_transform(np.clip(xn.numpy().astype(float), -_Q_CLIP, _Q_CLIP))
    start = 0
    for c, K in zip(cat, sizes):
        result[c] = xc[:, start:start + K].argmax(1).numpy().astype(np.int64)
        start += K
    return result[spec["columns"]]


def _uniform(sizes: list[int], n: int) -> torch.Tensor:
    return torch.cat([torch.full((n, K), 1.0 / K) for K in sizes], 1) if sizes else torch.zeros(n, 0)


def _block_softmax(logits: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    parts, start = [], 0
    for K in sizes:
        parts.append(torch.softmax(logits[:, start:start + K], 1))
        start += K
    return torch.cat(parts, 1)


def _sample_blocks(probs: torch.Tensor, sizes: list[int], g: torch.Generator) -> torch.Tensor:
    """One-hot draws from each categorical block of ``probs`` (shape (n, sum K))."""
    parts, start = [], 0
    for K in sizes:
        draw = torch.multinomial(probs[:, start:start + K], 1, generator=g)[:, 0]
        parts.append(nn.functional.one_hot(draw, K).float())
        start += K
    return torch.cat(parts, 1) if parts else probs


def generate(method: str, frame: pd.DataFrame, spec: dict, seed: int, p: Params) -> tuple[pd.DataFrame, float]:
    """Fit ``method`` on ``frame`` and draw as many rows; returns the table and the fit+sample seconds.

    The generator's settings come from ``p``: ``n_prop`` (TabSDS), ``copula_marginal``, ``gan_epochs``,
    ``arf_trees``, ``ddpm_steps``, ``ddpm_timesteps`` and ``jitter_scale``. The clock starts after the
    library baselines' global-RNG lock is taken, so a wait for another seed's baseline is not counted."""
    n = len(frame)
    warm_up_optimiser()
    with global_rng(seed) if method in LIBRARY else contextlib.nullcontext():
        started = time.perf_counter()
        out = _fit_sample(method, frame, spec, n, seed, p)
        seconds = time.perf_counter() - started
    return out, seconds


def _fit_sample(method: str, frame: pd.DataFrame, spec: dict, n: int, seed: int, p: Params) -> pd.DataFrame:
    if method.startswith("tabsds"):
        out = tabsds(frame, spec, int(method.split("_")[1]), seed, p.n_prop)
    elif method == "gaussian_copula":
        out = gaussian_copula(frame, spec, n, seed, p.copula_marginal)
    elif method in ("ctgan", "tvae"):
        out = ctgan_like(method, frame, spec, n, seed, p.gan_epochs)
    elif method == "arf":
        out = adversarial_rf(frame, spec, n, seed, p.arf_trees)
    elif method == "tabddpm":
        out = tabddpm(frame, spec, n, seed, p.ddpm_steps, p.ddpm_timesteps)
    elif method == "marginals":
        out = independent_marginals(frame, spec, n, seed)
    elif method == "bootstrap":
        out = row_bootstrap(frame, spec, n, seed)
    elif method == CONTROL:
        out = jittered_copies(frame, spec, n, seed, p.jitter_scale)
    else:
        raise ValueError(f"unknown generator '{method}'")
    return out


# ---------------------------------------------------------------------------------------------- 4. metrics


def encode(frame: pd.DataFrame, spec: dict, reference: pd.DataFrame, columns: list[str] | None = None) -> np.ndarray:
    """Numeric columns standardised by ``reference``'s mean / std, categorical columns one-hot;
    shape (n, n_num + sum K) over ``columns`` (default: all)."""
    columns = spec["columns"] if columns is None else columns
    parts = []
    for c in columns:
        if c in spec["cat_cols"]:
            parts.append(np.eye(spec["levels"][c])[frame[c].to_numpy(np.int64)])
        else:
            ref = reference[c].to_numpy(float)
            parts.append(((frame[c].to_numpy(float) - ref.mean()) / (ref.std() or 1.0))[:, None])
    return np.hstack(parts)


def marginal_distance(real: pd.DataFrame, syn: pd.DataFrame, spec: dict) -> float:
    """Mean over columns of the Kolmogorov-Smirnov statistic (numeric) or total variation (categorical)."""
    values = []
    for c in spec["columns"]:
        if c in spec["cat_cols"]:
            K = spec["levels"][c]
            p = np.bincount(real[c].to_numpy(np.int64), minlength=K) / len(real)
            q = np.bincount(syn[c].to_numpy(np.int64), minlength=K) / len(syn)
            values.append(0.5 * np.abs(p - q).sum())
        else:
            values.append(sps.ks_2samp(real[c].to_numpy(float), syn[c].to_numpy(float)).statistic)
    return float(np.mean(values))


def correlation_error(real: pd.DataFrame, syn: pd.DataFrame, spec: dict) -> float:
    """Frobenius norm of corr(real) - corr(syn), Pearson over all columns (categorical codes as numbers;
    a constant column correlates 0)."""
    def corr(frame: pd.DataFrame) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nan_to_num(np.corrcoef(frame[spec["columns"]].to_numpy(float), rowvar=False))
    return float(np.linalg.norm(corr(real) - corr(syn)))


def detection_auc(real: pd.DataFrame, syn: pd.DataFrame, spec: dict, seed: int, trees: int) -> float:
    """3-fold cross-validated ROC AUC of a random forest telling real rows from synthetic ones (0.5 = indistinguishable).

    Pass *held-out* real rows: against the rows a generator copied, a near-copy in the training fold
    labels its real twin 'synthetic' and the AUC drops below 0.5, rewarding memorisation.
    """
    X = np.vstack([encode(real, spec, real), encode(syn, spec, real)])
    y = np.r_[np.zeros(len(real)), np.ones(len(syn))]
    aucs = []
    for train, test in StratifiedKFold(3, shuffle=True, random_state=seed).split(X, y):
        clf = RandomForestClassifier(trees, min_samples_leaf=2, random_state=seed, n_jobs=1).fit(X[train], y[train])
        aucs.append(roc_auc_score(y[test], clf.predict_proba(X[test])[:, 1]))
    return float(np.mean(aucs))


def utility(train: pd.DataFrame, test: pd.DataFrame, spec: dict, seed: int, trees: int) -> float:
    """Train a random forest on ``train`` (real or synthetic), score it on the real ``test`` rows:
    accuracy (classification) or R^2 (regression)."""
    features = [c for c in spec["columns"] if c != spec["target"]]
    X_train, X_test = encode(train, spec, train, features), encode(test, spec, train, features)
    if spec["task"] == "classification":
        clf = RandomForestClassifier(trees, random_state=seed, n_jobs=1).fit(X_train, train["target"].to_numpy())
        return float(accuracy_score(test["target"].to_numpy(), clf.predict(X_test)))
    reg = RandomForestRegressor(trees, random_state=seed, n_jobs=1).fit(X_train, train["target"].to_numpy(float))
    return float(r2_score(test["target"].to_numpy(float), reg.predict(X_test)))


def distance_to_closest_record(real: np.ndarray, other: np.ndarray) -> np.ndarray:
    """For each real row (shape (n, d)), the Euclidean distance to its closest row of ``other`` (shape (m, d));
    shape (n,). (The official code's ``compute_dcr``: min over synthetic rows for each training row.)"""
    return pairwise_distances(real, other).min(axis=1)


def exact_copy_rate(real: pd.DataFrame, syn: pd.DataFrame, spec: dict) -> float:
    """Fraction of synthetic rows identical (every column) to some real row."""
    seen = set(map(tuple, real[spec["columns"]].to_numpy(float).tolist()))
    return float(np.mean([row in seen for row in map(tuple, syn[spec["columns"]].to_numpy(float).tolist())]))


def evaluate(train: pd.DataFrame, test: pd.DataFrame, syn: pd.DataFrame, spec: dict, seed: int, max_rows: int,
             trees: int) -> dict:
    """All metrics of one synthetic table against the real training half (and the held-out half): the energy
    distance on at most ``max_rows`` rows per side, random forests of ``trees`` trees."""
    rng = np.random.default_rng([seed, 5])
    sub = lambda a: a[rng.choice(len(a), max_rows, replace=False)] if len(a) > max_rows else a
    enc_train, enc_syn = encode(train, spec, train), encode(syn, spec, train)
    return {
        "ks_tv": marginal_distance(train, syn, spec),
        "corr_error": correlation_error(train, syn, spec),
        "energy": energy_distance(sub(enc_train), sub(enc_syn)),
        "detection_auc": detection_auc(test, syn, spec, seed, trees),
        "tstr": utility(syn, test, spec, seed, trees),
        "dcr_median": float(np.median(distance_to_closest_record(enc_train, enc_syn))),
        "exact_copy_rate": exact_copy_rate(train, syn, spec),
    }


# ---------------------------------------------------------------------------------------------- 5. one unit


def method_names(p: Params) -> list[str]:
    """``tabsds_<n_c>`` for every n_c of ``p.n_levels``, then ``p.baselines`` in ``GENERATORS`` order, then the
    negative control ``CONTROL``."""
    return ([f"tabsds_{k}" for k in p.n_levels] + [m for m in GENERATORS if m != "tabsds" and m in p.baselines]
            + [CONTROL])


def run_unit(p: Params, dataset: str, seed: int, with_baselines: bool, data_path: str | None = None) -> dict:
    """One (dataset, seed): split, TabSDS and the references, the baselines only ``with_baselines``, every metric.

    Reads the generators (:func:`method_names`, :func:`generate`), ``p.fair_rows``, ``p.eval_trees`` and
    ``p.max_eval_rows``. ``data_path``: the table saved by :func:`save_tables` (rebuilt when None).
    Returns ``{"rows": [per-method dict of metrics and seconds], "reference": {trtr, dcr_holdout_median, ...}}``.
    """
    frame, spec = load_table(dataset, p.fair_rows)
    if data_path is not None:
        frame = pd.read_parquet(data_path)[spec["columns"]]
    train, test = split_half(frame, seed)
    enc_train, enc_test = encode(train, spec, train), encode(test, spec, train)
    reference = {"dataset": dataset, "seed": seed, "n_train": len(train), "task": spec["task"],
                 "trtr": utility(train, test, spec, seed, p.eval_trees),
                 "dcr_holdout_median": float(np.median(distance_to_closest_record(enc_train, enc_test))),
                 "holdout_exact_copy_rate": exact_copy_rate(train, test, spec)}
    rows = []
    for method in method_names(p):
        if method in BASELINES and not with_baselines:
            continue
        syn, seconds = generate(method, train, spec, seed, p)
        rows.append({"dataset": dataset, "seed": seed, "method": method, "seconds": seconds,
                     **evaluate(train, test, syn, spec, seed, p.max_eval_rows, p.eval_trees)})
    return {"rows": rows, "reference": reference}


def save_table(name: str, fair_rows: int, path: Path) -> pd.DataFrame:
    """The prepared table (the data a unit reads)."""
    frame, _ = load_table(name, fair_rows)
    save_parquet(frame, path)
    return frame


def save_tables(p: Params, data_dir: str) -> dict[str, str]:
    """Every table of ``p.datasets`` as ``<data_dir>/<name>.parquet`` (features and target; categorical
    columns as integer codes); returns name -> path."""
    paths = {}
    for name in p.datasets:
        path = Path(data_dir) / f"{name}.parquet"
        save_table(name, p.fair_rows, path)
        paths[name] = str(path)
    return paths
