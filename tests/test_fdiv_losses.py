"""Unit tests of flows/fdiv_losses/method.py against independent references (no Prefect engine): closed forms,
the entmax package, a generic constrained solver (SLSQP), finite differences and convexity."""

import entmax
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for

from flows.fdiv_losses import method as M

GENS = sorted(M.GENERATORS)
D = torch.float64


def _theta(seed: int, rows: int, k: int, scale: float = 2.0) -> torch.Tensor:
    return torch.as_tensor(scale * np.random.default_rng(seed).standard_normal((rows, k)))


# ------------------------------------------------------------------------------------------- generators
@pytest.mark.parametrize("name", GENS)
def test_generator_closed_forms_are_consistent(name):
    gen = M.GENERATORS[name]
    t = torch.linspace(0.05, 5.0, 200, dtype=D)
    assert torch.allclose(gen.f(torch.ones(1, dtype=D)), torch.zeros(1, dtype=D), atol=1e-15)             # f(1) = 0
    h = 1e-6                                                                             # f' = df/dt (central FD)
    assert torch.allclose(gen.fprime(t), (gen.f(t + h) - gen.f(t - h)) / (2 * h), atol=1e-6)
    assert torch.allclose(gen.link(gen.fprime(t)), t, rtol=1e-10)                        # link inverts f'
    assert torch.all(gen.f(t + 0.01) + gen.f(t - 0.01) - 2 * gen.f(t) > 0)                # strictly convex
    if gen.fprime(torch.tensor(1e-12, dtype=D)) > -1e3:                                           # f'(0) finite: clipped link
        assert float(gen.link(gen.fprime(torch.tensor(0.0, dtype=D)) - 0.5)) == 0.0


@pytest.mark.parametrize("name", GENS)
def test_tau_bracket_contains_the_root(name):
    gen = M.GENERATORS[name]
    theta = _theta(0, 50, 7, scale=5.0)
    for q in (torch.ones(7, dtype=D), torch.as_tensor(np.random.default_rng(1).dirichlet(np.ones(7)))):
        lo, hi = M.tau_bracket(theta, q, gen)
        assert torch.all(lo <= hi)
        assert torch.all((q * gen.link(theta - lo)).sum(-1) >= 1 - 1e-12)
        assert torch.all((q * gen.link(theta - hi)).sum(-1) <= 1 + 1e-12)


# ------------------------------------------------------------------------------------------- f-softargmax
@pytest.mark.parametrize("name", GENS)
def test_bisection_matches_a_generic_constrained_solver(name):
    """SLSQP on <theta, p> - D_f(p, q) over the simplex knows nothing of the KKT route."""
    gen = M.GENERATORS[name]
    rng = np.random.default_rng(7)
    for i in range(4):
        theta = rng.standard_normal(4) * (0.5 if i % 2 else 3.0)
        q = np.ones(4) if i < 2 else rng.dirichlet(np.ones(4)) * 2
        ours = M.f_softargmax(torch.as_tensor(theta)[None], torch.as_tensor(q), gen, 80)[0].numpy()
        ref = M.brute_force_softargmax(theta, q, gen)
        assert np.abs(ours - ref).max() < 1e-4, (ours, ref)
        assert ours.sum() == pytest.approx(1.0, abs=1e-12) and ours.min() >= 0


def test_kl_is_softmax_with_the_log_prior():
    theta = _theta(1, 100, 12, scale=10.0)
    q = torch.as_tensor(np.random.default_rng(2).dirichlet(np.ones(12)) * 5)    # mass != 1 is allowed
    assert torch.allclose(M.f_softargmax(theta, q, M.GENERATORS["kl"], 60), torch.softmax(theta + q.log(), -1),
                          atol=1e-12)


@pytest.mark.parametrize("k", [3, 10, 40])
def test_alpha_and_chi2_are_entmax15_and_sparsemax(k):
    theta = _theta(k, 200, k, scale=3.0)
    unit, uniform = torch.ones(k, dtype=D), torch.full((k,), 1.0 / k, dtype=D)
    sm = lambda name, q: M.f_softargmax(theta, q, M.GENERATORS[name], 60)  # noqa: E731
    assert torch.allclose(sm("alpha15", unit), entmax.entmax15(theta, dim=-1), atol=1e-9)
    assert torch.allclose(sm("alpha15", uniform), entmax.entmax15(theta / k ** 0.5, dim=-1), atol=1e-9)
    assert torch.allclose(sm("alpha2", unit), entmax.sparsemax(theta, dim=-1), atol=1e-9)
    assert torch.allclose(sm("alpha2", uniform), entmax.sparsemax(theta / k, dim=-1), atol=1e-9)
    assert torch.allclose(sm("chi2", unit), entmax.sparsemax(theta / 2, dim=-1), atol=1e-9)   # (t-1)^2 = 2 x alpha2
    # the general-alpha reference of the entmax package, bisection-based but written independently
    assert torch.allclose(sm("alpha15", unit), entmax.entmax_bisect(theta, alpha=1.5, dim=-1, n_iter=80), atol=1e-6)


def test_few_halvings_are_not_exact():
    """The check has teeth: 5 halvings leave visible error on a sparse operator."""
    theta = _theta(3, 100, 10, scale=3.0)
    coarse = M.f_softargmax(theta, torch.ones(10, dtype=D), M.GENERATORS["alpha15"], 5)
    assert (coarse - entmax.entmax15(theta, dim=-1)).abs().max() > 1e-3


# ------------------------------------------------------------------------------------------- the loss
@pytest.mark.parametrize("name", GENS)
def test_loss_gradient_is_p_minus_y_and_matches_finite_differences(name):
    gen = M.GENERATORS[name]
    rng = np.random.default_rng(4)
    theta = torch.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    y = torch.as_tensor(rng.dirichlet(np.ones(5), size=3))                     # soft targets: D_f(y, q) finite
    q = torch.as_tensor(rng.dirichlet(np.ones(5)) * 5)
    assert torch.autograd.gradcheck(lambda t: M.f_loss(t, y, q, gen, 80), (theta,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", GENS)
def test_loss_is_convex_nonnegative_and_zero_at_a_matching_score(name):
    gen = M.GENERATORS[name]
    q = torch.ones(6, dtype=D)
    t1, t2 = _theta(5, 200, 6), _theta(6, 200, 6)
    y = torch.as_tensor(np.random.default_rng(8).dirichlet(np.ones(6), size=200))
    loss = lambda t: M.f_loss(t, y, q, gen, 80)  # noqa: E731
    assert torch.all(loss((t1 + t2) / 2) <= (loss(t1) + loss(t2)) / 2 + 1e-9)    # convex in theta
    assert torch.all(loss(t1) >= -1e-9)
    # a target on the simplex's interior is reached (loss -> 0) by scores along f'(y / q): the loss is proper
    target = y[:5]
    assert torch.all(M.f_loss(gen.fprime(target / q), target, q, gen, 80) < 1e-8)


def test_kl_loss_is_cross_entropy_in_value_and_gradient():
    assert M.kl_matches_cross_entropy(seed=3) < 1e-12
    theta = _theta(9, 32, 10)
    labels = torch.as_tensor(np.random.default_rng(9).integers(0, 10, 32))
    spec = M.loss_spec("kl")
    ours = M.training_loss(spec, torch.ones(10, dtype=D), 60)(theta, labels)
    assert float(ours) == pytest.approx(float(F.cross_entropy(theta, labels)), abs=1e-12)


def test_reverse_kl_one_hot_loss_is_infinite_but_its_gradient_finite():
    theta = _theta(10, 4, 5).requires_grad_(True)
    y = F.one_hot(torch.arange(4), 5).double()
    value = M.f_loss(theta, y, torch.ones(5, dtype=D), M.GENERATORS["rkl"], 60)
    assert torch.all(torch.isinf(value))
    (grad,) = torch.autograd.grad(value.mean(), theta)
    assert torch.isfinite(grad).all() and torch.allclose(grad.sum(-1), torch.zeros(4, dtype=D), atol=1e-12)


def test_unigram_reference_measure_and_prediction():
    counts = np.array([10, 0, 30, 60])
    q = M.reference_measure(M.loss_spec("alpha15_unigram"), counts, dtype=torch.float64)
    assert float(q.mean()) == pytest.approx(1.0) and float(q.min()) > 0
    assert torch.equal(M.reference_measure(M.loss_spec("alpha15"), counts), torch.ones(4, dtype=torch.float32))
    # equal scores: the prior decides the prediction (the most frequent class)
    pred = M.predict_classes(M.loss_spec("kl_unigram"), q, torch.zeros(2, 4, dtype=D), 60)
    assert pred.tolist() == [3, 3]
    with pytest.raises(ValueError):
        M.loss_spec("tsallis")


# ------------------------------------------------------------------------------------------- data and models
def test_lm_windows_predict_the_next_character_and_the_control_keeps_the_marginal():
    corpus = M.load_corpus(0.9)
    assert len(corpus.train) + len(corpus.test) == len(M.corpus_text()) > 40_000
    x, y = M.lm_training_windows(corpus, 8, seed=0, permute=False)
    assert torch.equal(x[5, 1:], y[5, :-1]) and torch.equal(x[6], y[5])            # y is x shifted by one
    _, yp = M.lm_training_windows(corpus, 8, seed=0, permute=True)
    assert np.array_equal(np.sort(M.permuted(corpus.train, 0)), np.sort(corpus.train))
    assert (yp != y).float().mean() > 0.8


def test_char_lm_is_causal():
    with M.torch_seeded(0):
        model = M.CharLM(20, 16, 2, 2, 12).double()
    ids = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 20
    a, b = model(ids), model(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-12)                         # the past ignores the future
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_digits_training_learns_and_the_permuted_control_does_not():
    p = params_for("fdiv_losses", clf_epochs=8)
    with M.torch_single_thread():
        assert M.run_digits(p, seed=0, loss_name="alpha15") > 0.85
        assert M.run_digits(p, seed=0, loss_name="ce") > 0.85
        assert M.run_digits(p, seed=0, loss_name="alpha15", permute=True) < 0.3


def test_exactness_errors_are_tiny_and_controls_are_not():
    p = params_for("fdiv_losses")
    e = M.exactness(p, seed=0)
    assert max(e["softmax"], e["entmax15"], e["sparsemax"]) < 1e-12
    assert min(e[k] for k in e if k.startswith("control")) > 0.05
    assert M.optimality_gap(p, seed=0) < 1e-9


def test_claims_name_the_control_rows_of_the_method():
    """claims.py spells out the control's row name so that it imports no training code: it must be the method's."""
    from flows.fdiv_losses import claims

    assert claims.CONTROL == M.CONTROL
