"""SFBD — Stochastic Forward–Backward Deconvolution (Lu, Wu & Yu, ICML 2025), at laptop scale.

The setting: a training set of which only a small fraction ``M`` is clean, x ~ p; the other ``N`` points are seen
only through a Gaussian measurement y = x + σ_ζ ε (the noise is drawn once per point: a *finite* noisy data set).
SFBD learns p anyway:

1. **Pretrain** an EDM denoiser D_φ0 on the clean points only.
2. For k = 1..K:
   - **backward (denoise)**: treat every noisy y as a diffusion state at noise level σ_ζ and integrate the
     deterministic probability-flow ODE of D_φ(k-1) from σ_ζ to 0 (EDM's Heun sampler on the EDM σ grid truncated to
     start at σ_ζ, as the official ``denoise.py`` does) → a set E_k of denoised samples;
   - **update**: fine-tune the denoiser on E_k with the standard EDM loss (the official code transfers the previous
     checkpoint) → D_φk.

Baselines: clean-only (step 1 alone), noisy-only naive (train on y as if clean), SFBD without clean pretraining
(start the loop from the naive noisy model) and an oracle trained on every training point clean.

Everything diffusion-generic (EDM preconditioning, EDM loss, the Heun sampler, the σ grid) comes from
``tasks.diffusion``; quality metrics from ``tasks.two_sample``. This file adds the truncated grid, the measurement
noise, the SFBD loop, the digits feature extractor for a "digits-FID" and the per-seed experiments
(``run_data_seed(p, seed, kind)`` with ``p`` the flow's typed params).
Shapes: data sets are float32 tensors (n, d); d = 2 for the toy densities, d = 64 for 8×8 digits in [-1, 1].
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from flows.sfbd_deconv.params import Params
from paperflows.core.seeding import numpy_rng, torch_generator, torch_seeded
from tasks import diffusion
from tasks.data import digits_pixels, make_toy_2d
from tasks.train import mlp, torch_single_thread, train
from tasks.two_sample import frechet_distance, mmd_rbf, sliced_wasserstein

KINDS = ("toy", "digits")  # the two data settings every seed runs (claims.py spells them too, tested)

# ----------------------------------------------------------------------------------------------------------------
# The two SFBD operations: forward (add the measurement noise) and backward (truncated probability-flow ODE)
# ----------------------------------------------------------------------------------------------------------------


def add_measurement_noise(x: np.ndarray, sigma_zeta: float, rng: np.random.Generator) -> np.ndarray:
    """The forward (noising) operator: y = x + σ_ζ ε, ε ~ N(0, I), one fixed draw per point. (n, d) -> (n, d)."""
    return x + sigma_zeta * rng.standard_normal(x.shape)


def truncated_sigmas(sigma_zeta: float, n_steps: int, sigma_min: float = 0.002, sigma_max: float = 80.0,
                     rho: float = 7.0) -> torch.Tensor:
    """EDM's ρ-spaced grid of ``n_steps`` levels (plus the final 0), truncated to start at σ_ζ.

    As in the official ``denoise.py``: keep the grid from the last level i with σ_i >= σ_ζ, then overwrite that
    first level by σ_ζ itself, so the ODE starts exactly at the noise level of the data and ends at 0.
    Returns a decreasing float64 tensor (m,), first entry σ_ζ, last entry 0.
    """
    sigmas = diffusion.edm_sigmas(n_steps, sigma_min=sigma_min, sigma_max=sigma_max, rho=rho)
    start = int(torch.nonzero(sigmas >= sigma_zeta).max())
    sigmas = sigmas[start:].clone()
    sigmas[0] = sigma_zeta
    return sigmas


def as_denoise_fn(denoiser: nn.Module) -> diffusion.DenoiseFn:
    """``denoise_fn(x, σ)`` for the toolkit's samplers from an ``EDMPrecond`` (evaluation mode, no gradients)."""
    denoiser.eval()

    def denoise_fn(x: torch.Tensor, sigma: float) -> torch.Tensor:
        with torch.no_grad():
            return denoiser(x, sigma)

    return denoise_fn


def backward_denoise(denoise_fn: diffusion.DenoiseFn, noisy: torch.Tensor, sigmas: torch.Tensor,
                     clip: tuple[float, float] | None = None) -> tuple[torch.Tensor, int]:
    """The backward step: integrate the deterministic Heun ODE from σ_ζ = sigmas[0] to 0 starting at the noisy data.

    ``clip`` (lo, hi) clamps the result to the data range (the official code stores denoised images as 8-bit PNGs,
    which clips them to [-1, 1]). Returns (denoised (n, d), NFE).
    """
    denoised, nfe = diffusion.heun_sample(denoise_fn, noisy, sigmas)
    if clip is not None:
        denoised = denoised.clamp(*clip)
    return denoised, nfe


def generate(denoise_fn: diffusion.DenoiseFn, n: int, dim: int, n_steps: int, seed: int,
             sigma_max: float = 80.0) -> torch.Tensor:
    """Unconditional samples: x_T = σ_max z, then the EDM Heun sampler on ``edm_sigmas(n_steps)``. -> (n, dim)."""
    start = sigma_max * torch.randn((n, dim), generator=torch_generator(seed))
    samples, _ = diffusion.heun_sample(denoise_fn, start, diffusion.edm_sigmas(n_steps, sigma_max=sigma_max))
    return samples


# ----------------------------------------------------------------------------------------------------------------
# Denoiser and the SFBD loop
# ----------------------------------------------------------------------------------------------------------------


def make_denoiser(dim: int, width: int, depth: int, embedding_dim: int, sigma_data: float,
                  seed: int) -> diffusion.EDMPrecond:
    """An EDM-preconditioned MLP denoiser D(x, σ) (SiLU, sinusoidal c_noise embedding), initialised from ``seed``."""
    with torch_seeded(seed):
        net = diffusion.TimeConditionedMLP(dim, width=width, depth=depth, embedding_dim=embedding_dim)
    return diffusion.EDMPrecond(net, sigma_data)


def fit(denoiser: diffusion.EDMPrecond, data: torch.Tensor, steps: int, batch_size: int, lr: float,
        seed: int) -> float:
    """EDM loss (ln σ ~ N(-1.2, 1.2²), λ(σ) = (σ²+σ_d²)/(σσ_d)²) with Adam; returns the mean loss of the last 10%."""
    history = diffusion.train_edm(denoiser, data, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
    tail = history[-max(1, len(history) // 10):]
    return float(np.mean(tail))


def sfbd(denoiser: diffusion.EDMPrecond, noisy: torch.Tensor, *, rounds: int, sigmas: torch.Tensor,
         finetune_steps: int, batch_size: int, lr: float, seed: int, clip: tuple[float, float] | None = None,
         on_round: Callable[[int, diffusion.EDMPrecond, torch.Tensor], None] | None = None,
         denoise: bool = True) -> diffusion.EDMPrecond:
    """K rounds of backward denoising of ``noisy`` (n, d) followed by fine-tuning on the denoised set (in place).

    ``sigmas``: the truncated grid (first entry σ_ζ); each update is ``finetune_steps`` Adam steps (``batch_size``,
    ``lr``). ``on_round(k, denoiser, E_k)`` is called after round k's update, with E_k the denoised samples the
    update was trained on. Returns the final denoiser D_φK. ``denoise=False`` ablates the backward denoising (each
    round fine-tunes on the noisy data as they are): the negative control of the claims.
    """
    for k in range(1, rounds + 1):
        denoised = backward_denoise(as_denoise_fn(denoiser), noisy, sigmas, clip)[0] if denoise else noisy
        fit(denoiser, denoised, finetune_steps, batch_size, lr, seed=seed + k)
        if on_round is not None:
            on_round(k, denoiser, denoised)
    return denoiser


# ----------------------------------------------------------------------------------------------------------------
# Data: a clean fraction, the rest noisy, a held-out clean test set
# ----------------------------------------------------------------------------------------------------------------


def split_data(clean: np.ndarray, n_test: int, sigma_zeta: float, seed: int) -> dict[str, np.ndarray]:
    """Shuffle ``clean`` (n, d) and split it into test (n_test) and train; noise every training point once.

    Returns ``train`` (clean, for the oracle and diagnostics), ``noisy`` (train + σ_ζ ε), ``test`` and ``order`` (a
    permutation of the training rows): the clean subset at fraction f is ``order[:round(f n_train)]`` (nested, so the
    4% subset lies inside the 10% subset) and the noisy subset is the rest, the same noise draw in both settings.
    """
    rng = numpy_rng(seed, 1)
    permutation = rng.permutation(len(clean))
    test, train_clean = clean[permutation[:n_test]], clean[permutation[n_test:]]
    noisy = add_measurement_noise(train_clean, sigma_zeta, numpy_rng(seed, 2))
    order = numpy_rng(seed, 3).permutation(len(train_clean))
    return {"train": train_clean, "noisy": noisy, "test": test, "order": order}


def n_clean(n_train: int, fraction: float) -> int:
    return max(2, round(fraction * n_train))


def toy_dataset(p: Params, seed: int) -> dict[str, np.ndarray]:
    """The 2-D density ``p.toy_name`` with ``p.toy_n_train + p.toy_n_test`` points, split and noised with
    ``p.toy_sigma_zeta``."""
    points = make_toy_2d(p.toy_name, p.toy_n_train + p.toy_n_test, seed)
    return split_data(points, p.toy_n_test, p.toy_sigma_zeta, seed)


def digits_dataset(p: Params, seed: int) -> dict[str, np.ndarray]:
    """scikit-learn's 8×8 digits in [-1, 1] (1797, 64): ``p.digits_n_test`` held out, the rest split and noised
    with ``p.digits_sigma_zeta``."""
    pixels, labels = digits_pixels()
    data = split_data(pixels, p.digits_n_test, p.digits_sigma_zeta, seed)
    permutation = numpy_rng(seed, 1).permutation(len(pixels))
    data["test_labels"] = labels[permutation[:p.digits_n_test]]
    data["train_labels"] = labels[permutation[p.digits_n_test:]]
    return data


def dataset(p: Params, seed: int, kind: str) -> dict[str, np.ndarray]:
    """The seed's data of ``kind`` (``toy`` or ``digits``)."""
    return toy_dataset(p, seed) if kind == "toy" else digits_dataset(p, seed)


def dataset_frame(p: Params, seed: int, kind: str) -> pd.DataFrame:
    """The seed's data of ``kind`` as one table, for inspection: clean features ``x0..``, the noisy version
    ``y0..`` of each training row, ``split`` (train / test), ``seed`` and ``clean_rank`` (train rows): the clean
    subset at fraction f is ``clean_rank < round(f n_train)``."""
    data = dataset(p, seed, kind)
    n_train = len(data["train"])
    rank = np.empty(n_train, dtype=int)
    rank[data["order"]] = np.arange(n_train)
    frames = []
    for split, clean, noisy in (("train", data["train"], data["noisy"]), ("test", data["test"], None)):
        frame = pd.DataFrame(clean, columns=[f"x{j}" for j in range(clean.shape[1])])
        if noisy is not None:
            frame = frame.join(pd.DataFrame(noisy, columns=[f"y{j}" for j in range(noisy.shape[1])]))
            frame["clean_rank"] = rank
        frames.append(frame.assign(seed=seed, split=split))
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------------------------------
# Digits-FID: the Fréchet distance in the penultimate features of a digits classifier trained on clean train data
# ----------------------------------------------------------------------------------------------------------------


def digits_feature_extractor(pixels: np.ndarray, labels: np.ndarray, hidden: list[int], epochs: int,
                             seed: int) -> tuple[Callable[[np.ndarray], np.ndarray], float]:
    """Train an MLP classifier 64 -> hidden -> 10 (ReLU) on clean digits; return (features, training accuracy).

    ``features(x)`` maps (n, 64) pixels to the activations of the last hidden layer, (n, hidden[-1]).
    """
    with torch_seeded(seed):
        classifier = mlp(pixels.shape[1], hidden, 10)
    X = torch.as_tensor(pixels, dtype=torch.float32)
    y = torch.as_tensor(labels, dtype=torch.long)
    train(classifier, X, y, loss_fn=nn.functional.cross_entropy, epochs=epochs, batch_size=64, lr=1e-3, seed=seed)
    body = classifier[:-1]
    with torch.no_grad():
        accuracy = float((classifier(X).argmax(1) == y).float().mean())

    def features(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return body(torch.as_tensor(x, dtype=torch.float32)).numpy().astype(np.float64)

    return features, accuracy


# ----------------------------------------------------------------------------------------------------------------
# One seed of one data type: every method, every round
# ----------------------------------------------------------------------------------------------------------------

LOW, HIGH = "low", "high"


@dataclass(frozen=True)
class DataSettings:
    """The settings of ``p`` that differ between the 2-D density (``toy_*``) and the digits (``digits_*``)."""

    sigma_zeta: float
    sigma_data: float
    width: int
    depth: int
    base_steps: int
    finetune_steps: int
    n_generate: int


def data_settings(p: Params, kind: str) -> DataSettings:
    if kind == "toy":
        return DataSettings(p.toy_sigma_zeta, p.toy_sigma_data, p.toy_width, p.toy_depth, p.toy_base_steps,
                            p.toy_finetune_steps, p.toy_n_generate)
    return DataSettings(p.digits_sigma_zeta, p.digits_sigma_data, p.digits_width, p.digits_depth,
                        p.digits_base_steps, p.digits_finetune_steps, p.digits_n_generate)


def run_data_seed(p: Params, seed: int, kind: str) -> dict:
    """All methods on one data type (``toy`` or ``digits``) for one seed, at the flow's params ``p`` (every field
    but ``seeds``; of the ``toy_*`` / ``digits_*`` fields those of ``kind``).

    Returns ``rows``: one row per (method, round, metric) with the metric value (toy: ``sw`` and ``mmd`` to the
    held-out test set; digits: ``fid``); ``denoise_rows``: the quality of each round's denoised set E_k against the
    true clean points behind the noisy data (per-coordinate MSE and distribution distance); and ``timings``.
    """
    started, cpu_started = time.perf_counter(), time.thread_time()
    with torch_single_thread():
        out = _run(p, seed, kind)
    out["timings"] = {"wall_s": time.perf_counter() - started, "cpu_s": time.thread_time() - cpu_started}
    return out


def _run(p: Params, seed: int, kind: str) -> dict:
    data = dataset(p, seed, kind)
    dim = data["train"].shape[1]
    settings = data_settings(p, kind)
    sigma_zeta, base_steps, finetune_steps = settings.sigma_zeta, settings.base_steps, settings.finetune_steps
    arch = {"width": settings.width, "depth": settings.depth, "embedding_dim": p.embedding_dim,
            "sigma_data": settings.sigma_data}
    clip = (-1.0, 1.0) if kind == "digits" else None
    sigmas = truncated_sigmas(sigma_zeta, p.denoise_steps)
    n_eval = settings.n_generate

    if kind == "toy":
        test = data["test"]

        def score(samples: np.ndarray, stream: int) -> dict[str, float]:
            return {"sw": sliced_wasserstein(samples, test, n_projections=p.sw_projections, seed=stream),
                    "mmd": mmd_rbf(samples[:p.mmd_points], test[:p.mmd_points])}
        reference_scores = score(data["train"][:n_eval], 0)
        classifier_accuracy = float("nan")
    else:
        features, classifier_accuracy = digits_feature_extractor(
            data["train"], data["train_labels"], p.classifier_hidden, p.classifier_epochs, seed)
        test_features = features(data["test"])

        def score(samples: np.ndarray, stream: int) -> dict[str, float]:
            return {"fid": frechet_distance(features(np.clip(samples, -1.0, 1.0)), test_features)}
        reference_scores = score(data["train"], 0)

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float32)

    rows: list[dict] = []
    denoise_rows: list[dict] = []
    method_ids = {"oracle": 1, "noisy_naive": 2, f"clean_only_{LOW}": 3, f"clean_only_{HIGH}": 4,
                  f"sfbd_{LOW}": 5, f"sfbd_{HIGH}": 6, "sfbd_noclean": 7, f"noisy_finetune_{LOW}": 8}

    n_shown = p.n_shown if kind == "toy" else 10  # points of the toy scatter; digit images
    shown: dict[str, list] = {"noisy_data": data["noisy"][:n_shown].tolist(), "clean_data": data["test"][:n_shown].tolist()}

    def evaluate(method: str, round_: int, denoiser: diffusion.EDMPrecond) -> None:
        stream = seed * 1000 + method_ids[method] * 10 + round_
        samples = generate(as_denoise_fn(denoiser), n_eval, dim, p.sample_steps, stream).numpy()
        if round_ in (0, p.rounds):
            shown[f"{method}@{round_}"] = samples[:n_shown].astype(np.float64).tolist()
        for metric, value in score(samples.astype(np.float64), stream).items():
            rows.append({"data": kind, "method": method, "round": round_, "metric": metric, "value": value,
                         "seed": seed})

    def new_model(method: str) -> diffusion.EDMPrecond:
        return make_denoiser(dim, seed=seed * 1000 + method_ids[method], **arch)

    def train_seed(method: str, round_: int = 0) -> int:
        return seed * 100_000 + method_ids[method] * 100 + round_

    # Oracle and noisy-only naive
    oracle = new_model("oracle")
    fit(oracle, tensor(data["train"]), base_steps, p.batch_size, p.lr, train_seed("oracle"))
    evaluate("oracle", 0, oracle)
    naive = new_model("noisy_naive")
    fit(naive, tensor(data["noisy"]), base_steps, p.batch_size, p.lr, train_seed("noisy_naive"))
    evaluate("noisy_naive", 0, naive)

    def run_sfbd(method: str, denoiser: diffusion.EDMPrecond, noisy_rows: np.ndarray) -> None:
        truth = data["train"][noisy_rows]
        noisy = tensor(data["noisy"][noisy_rows])

        def on_round(k: int, model: diffusion.EDMPrecond, denoised: torch.Tensor) -> None:
            evaluate(method, k, model)
            d = denoised.numpy().astype(np.float64)
            denoise_rows.append({"data": kind, "method": method, "round": k, "seed": seed,
                                 "mse_to_truth": float(((d - truth) ** 2).mean()),
                                 "sw_to_truth": sliced_wasserstein(d[:n_eval], truth[:n_eval],
                                                                   n_projections=p.sw_projections, seed=k)})

        sfbd(denoiser, noisy, rounds=p.rounds, sigmas=sigmas, finetune_steps=finetune_steps,
             batch_size=p.batch_size, lr=p.lr, seed=train_seed(method), clip=clip, on_round=on_round)

    # Clean-only pretraining at both fractions, then SFBD from each
    n_train = len(data["train"])
    for level, fraction in ((LOW, p.clean_fraction_low), (HIGH, p.clean_fraction_high)):
        m = n_clean(n_train, fraction)
        clean_rows, noisy_rows = data["order"][:m], data["order"][m:]
        model = new_model(f"clean_only_{level}")
        fit(model, tensor(data["train"][clean_rows]), base_steps, p.batch_size, p.lr,
            train_seed(f"clean_only_{level}"))
        evaluate(f"clean_only_{level}", 0, model)
        evaluate(f"sfbd_{level}", 0, model)
        if level == LOW:
            # the control: SFBD's loop from the same pretrained model with the denoising step ablated (the same
            # fine-tuning rounds on the raw noisy rows), scored after round 1 and round K
            ablated = copy.deepcopy(model)
            sfbd(ablated, tensor(data["noisy"][noisy_rows]), rounds=p.rounds, sigmas=sigmas,
                 finetune_steps=finetune_steps, batch_size=p.batch_size, lr=p.lr, seed=train_seed(f"sfbd_{level}"),
                 clip=clip, denoise=False,
                 on_round=lambda k, m, _: evaluate(f"noisy_finetune_{LOW}", k, m) if k in (1, p.rounds) else None)
        run_sfbd(f"sfbd_{level}", model, noisy_rows)

    # SFBD without clean pretraining: the loop starts from the naive noisy model, on the low-fraction noisy set
    noisy_rows = data["order"][n_clean(n_train, p.clean_fraction_low):]
    evaluate("sfbd_noclean", 0, naive)
    run_sfbd("sfbd_noclean", naive, noisy_rows)

    noisy_mse = float(((data["noisy"] - data["train"]) ** 2).mean())
    return {"rows": rows, "denoise_rows": denoise_rows, "reference": reference_scores, "shown": shown,
            "noisy_mse": noisy_mse, "classifier_accuracy": classifier_accuracy,
            "denoise_grid": [float(s) for s in sigmas], "sigma_zeta": sigma_zeta}
