"""Speculative sampling for diffusion models against independent references: the coupled acceptance step against
the target Gaussian (KS test) and the closed-form acceptance 1 - TV, the speculative chain driven by the exact
Gaussian-mixture ε against the toolkit's ancestral sampler (two-sample test, with an uncorrected draft as a positive
control), and the NFE bookkeeping on cases with known acceptance."""

import math

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy import stats as sps

from flows.speculative_diffusion import method
from paperflows.core.seeding import torch_generator
from tasks import diffusion
from tasks.two_sample import energy_permutation_test


def _energy_p(a, b):
    """Energy-distance permutation p-value."""
    return energy_permutation_test(a.numpy(), b.numpy(), n_permutations=100, seed=0)["p_value"]


def _coupled_draws(mean_p, mean_q, std, n, seed, reflect=True):
    gen = torch_generator(seed)
    d = len(mean_p)
    mp = torch.tensor(mean_p, dtype=torch.float64).expand(n, d)
    mq = torch.tensor(mean_q, dtype=torch.float64).expand(n, d)
    z = torch.randn((n, d), generator=gen, dtype=torch.float64)
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    x, accepted = method.coupled_step(mp, mq, torch.full((n,), std, dtype=torch.float64), z, u)
    if not reflect:   # a wrong rejection branch: fresh-looking m_p + s Z instead of the reflection
        x = torch.where(accepted[:, None], x, mp + std * z)
    return x.numpy(), accepted.numpy(), (mq + std * z).numpy()


def test_coupled_step_preserves_the_target_gaussian_in_1d():
    mean_p, mean_q, std = [0.3], [-0.5], 0.7
    x, accepted, y = _coupled_draws(mean_p, mean_q, std, 200_000, seed=0)
    assert sps.kstest(x[:, 0], "norm", args=(0.3, 0.7)).pvalue > 1e-3
    assert sps.kstest(y[:, 0], "norm", args=(-0.5, 0.7)).pvalue > 1e-3       # the draft is q
    # acceptance = 1 - TV(p, q) = 2 Φ(-|m_p - m_q| / 2s), within 5 binomial s.e.
    expected = 2 * sps.norm.cdf(-0.8 / 1.4)
    assert expected == pytest.approx(method.acceptance_probability(mean_p, mean_q, std))
    assert abs(accepted.mean() - expected) < 5 * math.sqrt(expected * (1 - expected) / len(accepted))
    # maximal coupling: X = Y exactly when accepted, and never otherwise
    assert np.array_equal(x[accepted], y[accepted]) and not np.any(x[~accepted] == y[~accepted])
    # positive control: without the reflection the rejected branch is biased and the KS test sees it
    wrong, _, _ = _coupled_draws(mean_p, mean_q, std, 200_000, seed=0, reflect=False)
    assert sps.kstest(wrong[:, 0], "norm", args=(0.3, 0.7)).pvalue < 1e-6


def test_coupled_step_in_3d_is_exact_along_and_across_the_reflection():
    mean_p, mean_q, std = [1.0, 0.0, -1.0], [0.2, 0.6, -0.4], 0.5
    x, accepted, _ = _coupled_draws(mean_p, mean_q, std, 100_000, seed=1)
    e = np.subtract(mean_q, mean_p) / np.linalg.norm(np.subtract(mean_q, mean_p))
    other = np.cross(e, [0.0, 0.0, 1.0])
    other /= np.linalg.norm(other)
    centred = (x - np.array(mean_p)) / std
    for direction in (e, other):
        assert sps.kstest(centred @ direction, "norm").pvalue > 1e-3
    np.testing.assert_allclose(np.cov(centred.T), np.eye(3), atol=0.03)
    expected = method.acceptance_probability(mean_p, mean_q, std)
    assert abs(accepted.mean() - expected) < 5 * math.sqrt(expected * (1 - expected) / len(accepted))


def test_zero_std_step_outputs_the_target_mean():
    mp = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    mq = torch.tensor([[1.0, 2.0], [0.0, 0.0]], dtype=torch.float64)
    x, ok = method.coupled_step(mp, mq, torch.zeros(2, dtype=torch.float64), torch.randn(2, 2, dtype=torch.float64),
                                torch.rand(2, dtype=torch.float64))
    assert ok.tolist() == [True, False]
    torch.testing.assert_close(x, mp)


@pytest.fixture(scope="module")
def mixture_chain():
    mixture = diffusion.gaussian_mixture([[-2.0, 0.0], [1.5, 1.0]], std=0.3, weights=[0.3, 0.7])
    schedule = diffusion.ddpm_schedule(50)
    return mixture, schedule, method.ddpm_chain(schedule), method.eps_rows_from_scalar(mixture.exact_eps_fn(schedule), 50)


def test_ddpm_chain_is_the_toolkit_ancestral_sampler(mixture_chain):
    mixture, schedule, chain, eps = mixture_chain
    x_T = torch.randn((200, 2), generator=torch_generator(3), dtype=torch.float64)
    reference, nfe = diffusion.ddpm_sample(mixture.exact_eps_fn(schedule), schedule, x_T, torch_generator(4))
    ours, our_nfe = method.ancestral_chain(chain, eps, x_T, torch_generator(4))
    torch.testing.assert_close(ours, reference)
    assert nfe == our_nfe == 50


def test_speculative_chain_draws_the_ancestral_law(mixture_chain):
    mixture, schedule, chain, eps = mixture_chain
    n = 1000
    x_T = torch.randn((n, 2), generator=torch_generator(5), dtype=torch.float64)
    plain, _ = diffusion.ddpm_sample(mixture.exact_eps_fn(schedule), schedule, x_T, torch_generator(6))
    x_init = torch.randn((n, 2), generator=torch_generator(7), dtype=torch.float64)
    spec, st = method.speculative_sample(chain, eps, x_init, 4, torch_generator(8))
    assert _energy_p(spec, plain) > 0.01
    assert 0.5 < float(st.accepted.sum() / st.proposed.sum()) < 1.0        # rejections did happen
    assert float(st.nfe.double().mean()) < 0.7 * 50                         # and it saved sequential calls
    # a poor independent draft (the ε of a different mixture) is slower but still exact
    wrong = diffusion.gaussian_mixture([[0.0, 0.0]], std=1.0)
    draft = method.eps_rows_from_scalar(wrong.exact_eps_fn(schedule), 50)
    spec2, st2 = method.speculative_sample(chain, eps, x_init, 4, torch_generator(9), draft="independent",
                                           draft_fn=draft)
    assert _energy_p(spec2, plain) > 0.01
    assert float(st2.accepted.sum() / st2.proposed.sum()) < 0.95
    # negative control of the exactness claims: the same frozen draft without the rejection step is detectably wrong
    naive, _ = method.speculative_sample(chain, eps, x_init, 8, torch_generator(8), verify=False)
    assert _energy_p(naive, plain) < 0.01


def test_speculative_is_deterministic_given_the_generator(mixture_chain):
    _, _, chain, eps = mixture_chain
    x = torch.randn((50, 2), generator=torch_generator(1), dtype=torch.float64)
    a, sa = method.speculative_sample(chain, eps, x, 3, torch_generator(2))
    b, sb = method.speculative_sample(chain, eps, x, 3, torch_generator(2))
    assert torch.equal(a, b) and torch.equal(sa.nfe, sb.nfe)


@pytest.mark.parametrize("K, L", [(30, 4), (30, 5), (7, 8)])
def test_nfe_bookkeeping_when_every_draft_is_accepted(mixture_chain, K, L):
    _, _, _, _ = mixture_chain
    schedule = diffusion.ddpm_schedule(max(K, 30))
    chain = method.ddpm_chain(schedule)
    chain = method.GaussianChain(chain.stds[-K:], lambda x, f, k, m=chain.mean: m(x, f, k + (len(schedule.betas) - K)))
    x = torch.randn((64, 2), generator=torch_generator(0), dtype=torch.float64)
    calls = diffusion.CountedFn(lambda y, k: torch.zeros_like(y))   # ε ≡ 0: the frozen draft IS the target
    _, st = method.speculative_sample(chain, calls, x, L, torch_generator(1))
    windows = math.ceil(K / L)
    assert st.accepted.eq(K).all() and st.proposed.eq(K).all()
    assert st.nfe.eq(1 + windows).all()            # one call at x_T, then one parallel call per window
    assert st.target_rows.eq(K).all()              # every state but x_0 is evaluated exactly once
    assert st.batched_calls == calls.calls == 1 + windows
    # independent draft identical to the target: every draft accepted, one target call per window
    gmm = diffusion.gaussian_mixture([[1.0, -1.0], [-1.0, 0.5]], std=0.4)
    eps = method.eps_rows_from_scalar(gmm.exact_eps_fn(schedule), schedule.n_steps)
    shifted = lambda y, k: eps(y, k + (schedule.n_steps - K))
    _, st = method.speculative_sample(chain, shifted, x, L, torch_generator(2), draft="independent", draft_fn=shifted)
    assert st.accepted.eq(K).all() and st.nfe.eq(windows).all() and st.draft_nfe.eq(K).all()
    assert st.target_rows.eq(K).all()


def test_banana_gradient_and_speculative_langevin():
    x = torch.randn((20, 2), generator=torch_generator(0), dtype=torch.float64).requires_grad_(True)
    log_density = (-x[:, 0] ** 2 / 8 - (x[:, 1] - 0.3 * (x[:, 0] ** 2 - 4)) ** 2 / 2).sum()
    (grad,) = torch.autograd.grad(log_density, x)
    torch.testing.assert_close(method.banana_grad(x.detach()), grad)
    chain = method.langevin_chain(0.05, 60)
    target = lambda y, k: method.banana_grad(y)
    x0 = torch.randn((1000, 2), generator=torch_generator(1), dtype=torch.float64)
    plain, nfe = method.ancestral_chain(chain, target, x0, torch_generator(2))
    spec, st = method.speculative_sample(chain, target, torch.randn((1000, 2), generator=torch_generator(3),
                                                                    dtype=torch.float64), 4, torch_generator(4))
    assert _energy_p(spec, plain) > 0.01
    assert float(st.nfe.double().mean()) < 0.7 * nfe


def test_params_match_the_toolkit_and_reject_inconsistent_config():
    from typing import get_args

    from flows.speculative_diffusion.params import TOY_2D, Dataset
    from tasks.data import TOY_2D_NAMES

    assert TOY_2D == TOY_2D_NAMES and set(get_args(Dataset)) == {*TOY_2D_NAMES, "digits"}
    params_for("speculative_diffusion", datasets=["moons", "digits"], lookaheads=[1, 3])
    for bad in ({"datasets": ["digits"]}, {"datasets": ["spiral"]}, {"datasets": ["moons", "moons"]},
                {"lookaheads": [4, 2]}, {"lookaheads": [2, 2]}, {"lookaheads": [0, 2]},
                {"langevin_targets": ["rosenbrock"]}):
        with pytest.raises(ValueError):
            params_for("speculative_diffusion", **bad)


def test_langevin_experiment_runs_the_uncorrected_control_and_the_claims_name_it():
    from conftest import params_for

    from flows.speculative_diffusion.claims import PAPER

    p = params_for("speculative_diffusion", n_samples=200, langevin_steps=20, n_permutations=19)
    rows = method.langevin_experiment("gmm4", p, 0)["rows"]
    drafts = [(r["draft"], r["L"]) for r in rows]
    assert ("frozen_unverified", p.lookaheads[-1]) in drafts
    assert [d for d, _ in drafts].count("frozen") == len(p.lookaheads)
    claims = {c.id: c for c in PAPER.claims}
    assert claims["langevin_exact"].control.metric == "langevin.unverified_min_pass_fraction"
    assert claims["exact_samples_mmd"].control.metric == "exactness.unverified_min_pass_fraction"
    assert all(c.role == "claim" for c in PAPER.claims)


def test_the_exactness_ratio_is_the_mean_over_a_bonferroni_t_half_width():
    from flows.speculative_diffusion.evaluate import _energy_z

    diff = np.array([0.1, -0.3, 0.4, 0.2, 0.05])
    half = sps.t.ppf(1 - 0.05 / 6, 4) * diff.std(ddof=1) / np.sqrt(5)   # 95% over 3 data sets, two-sided
    out = _energy_z(diff, data_sets=3)
    assert out["interval_ratio"] == pytest.approx(abs(diff.mean()) / half)
    assert out["z"] == pytest.approx(diff.mean() / (diff.std(ddof=1) / np.sqrt(5)))
    assert out["interval_ratio"] < abs(out["z"]) / 2, "at 5 seeds the t quantile is well above 2"
