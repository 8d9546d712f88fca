"""SFBD against independent references: the truncated EDM grid against Karras et al.'s formula, the noising
operator, the backward (truncated probability-flow ODE) step driven by the exact denoiser of a Gaussian mixture
(its output must be distributed as the clean mixture), the nested clean/noisy split, and determinism by seed."""

import itertools
import math

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.sfbd_deconv import method
from paperflows.core.seeding import torch_generator
from tasks import diffusion
from tasks.two_sample import energy_distance, energy_permutation_test


def _karras(n_steps, sigma_min=0.002, sigma_max=80.0, rho=7.0):
    """Karras et al. eq. 5 written out, independent of tasks.diffusion."""
    return [(sigma_max ** (1 / rho) + i / (n_steps - 1) * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho
            for i in range(n_steps)]


@pytest.mark.parametrize("sigma_zeta", [0.5, 0.3, 1.0, 0.0021])
@pytest.mark.parametrize("n_steps", [18, 40])
def test_truncated_grid_starts_at_sigma_zeta_and_ends_at_zero(sigma_zeta, n_steps):
    grid = method.truncated_sigmas(sigma_zeta, n_steps).tolist()
    assert grid[0] == sigma_zeta and grid[-1] == 0.0
    assert all(a > b for a, b in itertools.pairwise(grid))  # strictly decreasing
    below = [s for s in _karras(n_steps) if s < sigma_zeta]
    assert grid[1:-1] == pytest.approx(below, rel=1e-12)  # exactly the EDM levels below sigma_zeta, then 0


def test_truncated_grid_keeps_a_level_equal_to_sigma_zeta_once():
    level = _karras(18)[11]
    grid = method.truncated_sigmas(level, 18).tolist()
    assert grid[0] == level and grid[1] < level and grid[1] == pytest.approx(_karras(18)[12])


def test_noising_is_x_plus_sigma_times_standard_normal():
    x = np.random.default_rng(0).uniform(-1, 1, size=(20000, 3))
    y = method.add_measurement_noise(x, 0.37, np.random.default_rng(5))
    eps = np.random.default_rng(5).standard_normal(x.shape)
    np.testing.assert_allclose(y, x + 0.37 * eps, rtol=0, atol=1e-15)
    residual = (y - x) / 0.37
    assert abs(residual.mean()) < 0.02 and abs(residual.std() - 1.0) < 0.02


@pytest.fixture
def mixture():
    return diffusion.gaussian_mixture([[-1.5, 0.0], [1.5, 0.5], [0.0, -1.5]], std=0.25, weights=[0.5, 0.3, 0.2])


def test_backward_step_with_the_exact_denoiser_recovers_the_clean_mixture(mixture):
    sigma_zeta = 0.5
    clean = mixture.sample(800, torch_generator(0))
    noisy = clean + sigma_zeta * torch.randn(clean.shape, generator=torch_generator(1), dtype=torch.float64)
    denoised, nfe = method.backward_denoise(mixture.exact_denoise_fn(), noisy,
                                            method.truncated_sigmas(sigma_zeta, 200))
    assert nfe == 2 * (len(method.truncated_sigmas(sigma_zeta, 200)) - 1) - 1
    reference = mixture.sample(800, torch_generator(2)).numpy()
    before = energy_distance(noisy.numpy(), reference)
    after = energy_distance(denoised.numpy(), reference)
    assert after < 0.2 * before
    # the ODE maps the noised mixture onto the clean mixture: indistinguishable from fresh clean draws
    assert energy_permutation_test(denoised.numpy(), reference, n_permutations=100, seed=0)["p_value"] > 0.01
    # and its modes are as tight as the clean ones (component std 0.25, the noisy data's is ~0.56)
    nearest = ((denoised[:, None, :] - mixture.means[None]) ** 2).sum(-1).argmin(1)
    spread = (denoised - mixture.means[nearest]).std()
    assert float(spread) == pytest.approx(0.25, abs=0.03)
    assert float((noisy - mixture.means[nearest]).std()) > 0.5


def test_backward_step_of_a_gaussian_matches_the_closed_form_ode_map():
    """For x ~ N(0, s² I), the probability-flow ODE from σ to 0 is the linear map y -> y · s / √(s² + σ²)."""
    s, sigma_zeta = 0.8, 0.6
    gaussian = diffusion.gaussian_mixture([[0.0, 0.0]], std=s)
    y = torch.randn(50, 2, generator=torch_generator(3), dtype=torch.float64)
    denoised, _ = method.backward_denoise(gaussian.exact_denoise_fn(), y, method.truncated_sigmas(sigma_zeta, 400))
    torch.testing.assert_close(denoised, y * s / math.sqrt(s ** 2 + sigma_zeta ** 2), rtol=1e-4, atol=1e-5)


def test_clip_bounds_the_denoised_digits():
    gaussian = diffusion.gaussian_mixture([[0.0] * 4], std=3.0)
    y = 4 * torch.randn(100, 4, generator=torch_generator(4), dtype=torch.float64)
    denoised, _ = method.backward_denoise(gaussian.exact_denoise_fn(), y, method.truncated_sigmas(0.3, 18),
                                          clip=(-1.0, 1.0))
    assert float(denoised.abs().max()) <= 1.0


def test_split_is_nested_disjoint_and_noised_once():
    cfg = params_for("sfbd_deconv", toy_name="moons", toy_n_train=1000, toy_n_test=200, toy_sigma_zeta=0.5)
    data = method.toy_dataset(cfg, seed=7)
    assert data["train"].shape == (1000, 2) and data["test"].shape == (200, 2)
    assert sorted(data["order"].tolist()) == list(range(1000))
    low, high = method.n_clean(1000, 0.04), method.n_clean(1000, 0.10)
    assert (low, high) == (40, 100)
    assert set(data["order"][:low]) < set(data["order"][:high])  # the 4% subset lies inside the 10% subset
    rows = {tuple(r) for r in np.round(data["train"], 12)}
    assert not rows & {tuple(r) for r in np.round(data["test"], 12)}
    residual = (data["noisy"] - data["train"]) / 0.5
    assert abs(residual.std() - 1.0) < 0.05
    again = method.toy_dataset(cfg, seed=7)
    np.testing.assert_array_equal(again["noisy"], data["noisy"])
    assert not np.array_equal(method.toy_dataset(cfg, seed=8)["noisy"], data["noisy"])


def test_digits_features_separate_classes():
    data = method.digits_dataset(params_for("sfbd_deconv", digits_n_test=300, digits_sigma_zeta=0.3), seed=0)
    features, accuracy = method.digits_feature_extractor(data["train"], data["train_labels"], [64, 32], 15, seed=0)
    assert features(data["test"]).shape == (300, 32)
    assert accuracy > 0.95


TINY = params_for("sfbd_deconv", toy_name="moons", toy_n_train=300, toy_n_test=100, toy_sigma_zeta=0.5,
                  toy_sigma_data=1.0, toy_width=16, toy_depth=2, toy_base_steps=10, toy_finetune_steps=3,
                  toy_n_generate=100, digits_n_test=200, digits_sigma_zeta=0.3, digits_sigma_data=0.5,
                  digits_width=16, digits_depth=2, digits_base_steps=10, digits_finetune_steps=3,
                  digits_n_generate=100, clean_fraction_low=0.04, clean_fraction_high=0.10, rounds=2,
                  denoise_steps=18, sample_steps=6, embedding_dim=8, batch_size=32, lr=1e-3, mmd_points=50,
                  sw_projections=8, classifier_hidden=[16], classifier_epochs=1, n_shown=10)


@pytest.mark.parametrize("kind", ["toy", "digits"])
def test_run_is_deterministic_by_seed_and_covers_every_method_and_round(kind):
    first = method.run_data_seed(TINY, 3, kind)
    second = method.run_data_seed(TINY, 3, kind)
    assert first["rows"] == second["rows"] and first["denoise_rows"] == second["denoise_rows"]
    other = method.run_data_seed(TINY, 4, kind)
    assert [r["value"] for r in other["rows"]] != [r["value"] for r in first["rows"]]
    seen = {(r["method"], r["round"]) for r in first["rows"]}
    for name in ("sfbd_low", "sfbd_high", "sfbd_noclean"):
        assert {(name, k) for k in range(3)} <= seen
    assert {("oracle", 0), ("noisy_naive", 0), ("clean_only_low", 0), ("clean_only_high", 0)} <= seen
    # the control (denoising ablated) is scored after its first and last round
    assert {k for m, k in seen if m == "noisy_finetune_low"} == {1, TINY.rounds}
    assert all(np.isfinite(r["value"]) for r in first["rows"])
    sigma_zeta = TINY.toy_sigma_zeta if kind == "toy" else TINY.digits_sigma_zeta
    assert first["denoise_grid"][0] == sigma_zeta and first["denoise_grid"][-1] == 0.0


def test_sfbd_trains_each_round_on_the_denoised_set():
    denoiser = method.make_denoiser(2, 16, 2, 8, 1.0, seed=0)
    noisy = torch.randn(64, 2, generator=torch_generator(0))
    before = [p.detach().clone() for p in denoiser.parameters()]
    seen = []
    method.sfbd(denoiser, noisy, rounds=3, sigmas=method.truncated_sigmas(0.5, 18), finetune_steps=2,
                batch_size=16, lr=1e-3, seed=0,
                on_round=lambda k, model, denoised: seen.append((k, denoised.shape)))
    assert seen == [(1, (64, 2)), (2, (64, 2)), (3, (64, 2))]
    assert any(not torch.equal(a, b) for a, b in zip(before, denoiser.parameters()))


def test_ablated_sfbd_fine_tunes_on_the_noisy_data_as_they_are():
    """The control: with denoise=False every round trains on the noisy tensor itself, with the same minibatch
    seeds as SFBD, so SFBD and its ablation differ only by the denoising step."""
    noisy = torch.randn(64, 2, generator=torch_generator(0))
    seen = []
    ablated = method.make_denoiser(2, 16, 2, 8, 1.0, seed=0)
    method.sfbd(ablated, noisy, rounds=2, sigmas=method.truncated_sigmas(0.5, 18), finetune_steps=2,
                batch_size=16, lr=1e-3, seed=0, denoise=False, on_round=lambda k, model, data: seen.append(data))
    assert all(d is noisy for d in seen)
    by_hand = method.make_denoiser(2, 16, 2, 8, 1.0, seed=0)
    for k in (1, 2):
        method.fit(by_hand, noisy, 2, 16, 1e-3, seed=k)
    assert all(torch.equal(a, b) for a, b in zip(ablated.parameters(), by_hand.parameters()))


def test_params_reject_inconsistent_config():
    from flows.sfbd_deconv.params import SMOKE

    assert params_for("sfbd_deconv").rounds == SMOKE["rounds"]
    for bad in ({"clean_fraction_low": 0.1, "clean_fraction_high": 0.04}, {"clean_fraction_high": 0.04},
                {"embedding_dim": 7}, {"toy_name": "spiral"}):
        with pytest.raises(ValueError):
            params_for("sfbd_deconv", **bad)


def test_the_claims_name_the_data_settings_the_experiment_runs():
    from flows.sfbd_deconv import claims, method

    assert claims.KINDS == method.KINDS
