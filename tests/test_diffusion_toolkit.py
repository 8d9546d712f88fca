"""tasks.diffusion against closed forms: the posterior of the forward process, the mixture's score, samplers driven by
the exact mixture score, guidance against finite differences, and the trainers' determinism."""

import math

import numpy as np
import pytest
import torch

from paperflows.core.seeding import torch_generator
from tasks import diffusion
from tasks.two_sample import energy_permutation_test


@pytest.fixture
def mixture():
    return diffusion.gaussian_mixture([[-2.0], [1.5]], std=0.3, weights=[0.3, 0.7])


def test_schedules_end_near_pure_noise():
    for kind in ("linear", "cosine"):
        schedule = diffusion.ddpm_schedule(100, kind)
        assert schedule.alpha_bar(100) < 1e-3
        assert torch.all(schedule.alpha_bars[1:] < schedule.alpha_bars[:-1])
    with pytest.raises(ValueError, match="at least 25 steps"):
        diffusion.ddpm_schedule(10)
    sigmas = diffusion.edm_sigmas(18)
    assert sigmas[0] == pytest.approx(80.0) and sigmas[-2] == pytest.approx(0.002) and sigmas[-1] == 0


def test_transition_mean_is_the_forward_posterior_mean():
    schedule = diffusion.ddpm_schedule(50)
    rng = torch_generator(0)
    x0 = torch.randn(5, 3, generator=rng, dtype=torch.float64)
    noise = torch.randn(5, 3, generator=rng, dtype=torch.float64)
    t = 20
    x_t = schedule.add_noise(x0, noise, torch.full((5,), t))
    beta, ab, ab_prev = float(schedule.betas[t - 1]), schedule.alpha_bar(t), schedule.alpha_bar(t - 1)
    # q(x_{t-1} | x_t, x_0) from Ho et al. eq. 7
    posterior_mean = ((math.sqrt(ab_prev) * beta / (1 - ab)) * x0
                      + (math.sqrt(1 - beta) * (1 - ab_prev) / (1 - ab)) * x_t)
    torch.testing.assert_close(schedule.transition_mean(x_t, noise, t), posterior_mean)
    torch.testing.assert_close(schedule.posterior_mean(x_t, x0, t), posterior_mean)
    assert schedule.transition_std(t) ** 2 == pytest.approx(beta * (1 - ab_prev) / (1 - ab))
    torch.testing.assert_close(schedule.predict_x0(x_t, noise, t), x0)


def test_mixture_score_is_the_gradient_of_its_log_density(mixture):
    x = torch.linspace(-4, 4, 17, dtype=torch.float64)[:, None].requires_grad_(True)
    (gradient,) = torch.autograd.grad(mixture.log_prob(x).sum(), x)
    torch.testing.assert_close(mixture.score(x.detach()), gradient)
    total = torch.exp(mixture.log_prob(torch.linspace(-8, 8, 4001, dtype=torch.float64)[:, None])).sum() * 0.004
    assert float(total) == pytest.approx(1.0, abs=1e-6)


def _reference(mixture, n=1500):
    return mixture.sample(n, torch_generator(99)).numpy()


def test_ancestral_sampler_with_the_exact_score_draws_the_mixture(mixture):
    schedule = diffusion.ddpm_schedule(200)
    x_T = torch.randn(1500, 1, generator=torch_generator(1), dtype=torch.float64)
    samples, nfe = diffusion.ddpm_sample(mixture.exact_eps_fn(schedule), schedule, x_T, torch_generator(2))
    assert nfe == 200
    assert energy_permutation_test(samples.numpy(), _reference(mixture), n_permutations=100)["p_value"] > 0.05
    assert float((samples < 0).double().mean()) == pytest.approx(0.3, abs=0.04)


def test_ddim_and_heun_with_the_exact_score_draw_the_mixture(mixture):
    schedule = diffusion.ddpm_schedule(200)
    x_T = torch.randn(1500, 1, generator=torch_generator(3), dtype=torch.float64)
    ddim, ddim_nfe = diffusion.ddim_sample(mixture.exact_eps_fn(schedule), schedule, x_T, 50)
    sigmas = diffusion.edm_sigmas(18, sigma_max=20.0)
    heun, heun_nfe = diffusion.heun_sample(mixture.exact_denoise_fn(), x_T * sigmas[0], sigmas)
    assert ddim_nfe == 50 and heun_nfe == 2 * 18 - 1
    for samples in (ddim, heun):
        assert energy_permutation_test(samples.numpy(), _reference(mixture), n_permutations=100)["p_value"] > 0.05


def test_a_sampler_with_a_wrong_score_is_rejected(mixture):
    schedule = diffusion.ddpm_schedule(100)
    shifted = diffusion.gaussian_mixture([[-1.0], [2.5]], std=0.3, weights=[0.3, 0.7])
    x_T = torch.randn(1500, 1, generator=torch_generator(4), dtype=torch.float64)
    samples, _ = diffusion.ddpm_sample(shifted.exact_eps_fn(schedule), schedule, x_T, torch_generator(5))
    assert energy_permutation_test(samples.numpy(), _reference(mixture), n_permutations=100)["p_value"] < 0.01


def test_tweedie_guidance_matches_finite_differences(mixture):
    schedule = diffusion.ddpm_schedule(50)
    eps_fn = mixture.exact_eps_fn(schedule)
    signal = lambda x0: -((x0 - 1.0) ** 2).sum(1)  # noqa: E731
    guidance = diffusion.tweedie_guidance(eps_fn, schedule, signal, weight=0.5)
    x = torch.tensor([[-0.7], [0.2], [1.1]], dtype=torch.float64)
    t, h = 25, 1e-6
    value = lambda z: float(signal(schedule.predict_x0(z, eps_fn(z, t), t)).sum())  # noqa: E731
    basis = torch.eye(3, dtype=torch.float64)[:, :, None]
    numeric = torch.tensor([(value(x + h * e) - value(x - h * e)) / (2 * h) for e in basis], dtype=torch.float64)
    torch.testing.assert_close(guidance(x, t), 0.5 * numeric.reshape(3, 1), rtol=1e-5, atol=1e-7)


def test_guidance_moves_samples_toward_the_signal(mixture):
    schedule = diffusion.ddpm_schedule(100)
    eps_fn = mixture.exact_eps_fn(schedule)
    guidance = diffusion.tweedie_guidance(eps_fn, schedule, lambda x0: -((x0 + 2.0) ** 2).sum(1), weight=1.0)
    x_T = torch.randn(800, 1, generator=torch_generator(6), dtype=torch.float64)
    plain, _ = diffusion.ddpm_sample(eps_fn, schedule, x_T, torch_generator(7))
    guided, _ = diffusion.ddpm_sample(eps_fn, schedule, x_T, torch_generator(7), guidance=guidance)
    assert float((guided < 0).double().mean()) > float((plain < 0).double().mean()) + 0.2


def test_counted_fn_counts_sequential_calls_and_rows():
    counted = diffusion.CountedFn(lambda x, t: x)
    counted(torch.zeros(4, 2), 1)
    counted(torch.zeros(7, 2), 2)
    assert (counted.calls, counted.rows) == (2, 11)


def test_ddpm_training_learns_and_is_deterministic(mixture):
    schedule = diffusion.ddpm_schedule(50)
    data = mixture.sample(512, torch_generator(8)).float()

    def fit():
        torch.manual_seed(0)
        net = diffusion.TimeConditionedMLP(1, width=32, depth=2, time_scale=1.0)
        return net, diffusion.train_ddpm(net, data, schedule, steps=200, batch_size=128, lr=3e-3, seed=9)

    net, losses = fit()
    _, again = fit()
    assert losses == again
    assert np.mean(losses[-50:]) < 0.8 * np.mean(losses[:20])


def test_classifier_free_guidance_combines_conditional_and_null_predictions():
    torch.manual_seed(0)
    net = diffusion.TimeConditionedMLP(2, width=16, depth=1, n_classes=3)
    x = torch.randn(4, 2)
    labels = torch.tensor([0, 1, 2, 0])
    time = torch.full((4,), 5.0)
    conditional, unconditional = net(x, time, labels), net(x, time, None)
    guided = diffusion.eps_from_net(net, labels, guidance_scale=2.0)(x, 5)
    torch.testing.assert_close(guided, 3 * conditional - 2 * unconditional)
    torch.testing.assert_close(diffusion.eps_from_net(net, labels)(x, 5), conditional)


def test_edm_preconditioning_and_training():
    sigma_data = 0.5
    net = diffusion.TimeConditionedMLP(2, width=32, depth=2)
    for p in net.net[-1].parameters():
        torch.nn.init.zeros_(p)
    denoiser = diffusion.EDMPrecond(net, sigma_data)
    x = torch.randn(3, 2)
    # with F = 0 the denoiser is the Wiener shrinkage c_skip x, optimal for N(0, σ_d²) data
    torch.testing.assert_close(denoiser(x, 1.0), x * sigma_data ** 2 / (1 + sigma_data ** 2))
    data = diffusion.gaussian_mixture([[-1.0, 0.0], [1.0, 0.0]], std=0.1).sample(512, torch_generator(10)).float()
    torch.manual_seed(0)
    losses = diffusion.train_edm(diffusion.EDMPrecond(diffusion.TimeConditionedMLP(2, 32, 2), sigma_data=1.0), data,
                                 steps=200, batch_size=128, lr=3e-3, seed=11)
    assert np.mean(losses[-50:]) < 0.8 * np.mean(losses[:20])
