"""cs_rs: Certify-CS and the CS-MACER loss against independent references (smoke run, determinism and
params come from test_papers.py)."""

import numpy as np
import torch
from conftest import params_for
from scipy.optimize import brentq
from scipy.stats import beta, norm

from flows.cs_rs import method
from tasks import smoothing


def test_certify_cs_matches_beta_quantiles_and_bonferroni():
    # one point, 3 classes, top class 0, sensitive targets {1, 2}
    selection = np.array([[80, 15, 5]])
    estimation = np.array([[1500, 380, 120]])
    targets = np.array([[False, True, True]])
    sigma, alpha = 0.5, 0.001
    top, radius, r1, r2 = method.certify_cs(selection, estimation, targets, sigma, alpha)
    p_a1 = beta.ppf(alpha, 1500, 501)                   # Cohen: one-sided lower bound at alpha
    p_a2 = beta.ppf(alpha / 2, 1500, 501)               # Certify-CS: at alpha / 2
    p_b = max(beta.ppf(1 - alpha / 4, k + 1, 2000 - k) for k in (380, 120))   # Bonferroni over |Omega| = 2
    assert top[0] == 0
    np.testing.assert_allclose(r1[0], sigma * norm.ppf(p_a1), rtol=1e-10)
    np.testing.assert_allclose(r2[0], sigma / 2 * (norm.ppf(p_a2) - norm.ppf(p_b)), rtol=1e-10)
    assert radius[0] == max(r1[0], r2[0])


def test_sensitive_mask_and_robust_counting():
    labels = np.array([3, 5, 8, 4])
    cost = method.CostMatrix(seeds=(3, 8), targets=(5, 9))
    mask = method.sensitive_mask(labels, cost)
    assert mask[0, [5, 9]].all() and mask[0].sum() == 2 and mask[2].sum() == 2 and not mask[[1, 3]].any()
    standard = method.sensitive_mask(labels, cost.standard())
    assert standard[0].sum() == 9 and not standard[0, 3] and not standard[[1, 3]].any()
    everyone = method.sensitive_mask(labels, None)
    assert (everyone.sum(1) == 9).all() and not everyone[np.arange(4), labels].any()
    # a wrong but non-sensitive top class counts as robust (official analyze.py), a sensitive one never
    seeds_mask = method.sensitive_mask(np.array([3, 3, 8, 4]), cost)
    top, radius = np.array([8, 5, 8, 5]), np.array([1.0, 1.0, 0.1, 1.0])
    assert list(method.robust_at(top, radius, seeds_mask, 0.5)) == [True, False, False, True]


class ThreeBands(torch.nn.Module):
    """f(x) = 0 if x_1 < a, 1 if a <= x_1 < b, 2 otherwise: smoothed probabilities in closed form."""

    a, b = -1.0, 1.5

    def forward(self, x):
        x1 = x[:, 0]
        cls = (x1 >= self.a).long() + (x1 >= self.b).long()
        return torch.nn.functional.one_hot(cls, 3).double() * 10


def _smoothed(x1, sigma):
    p0 = norm.cdf((ThreeBands.a - x1) / sigma)
    p2 = norm.sf((ThreeBands.b - x1) / sigma)
    return np.array([p0, 1 - p0 - p2, p2])


def test_certify_cs_is_valid_and_tighter_than_cohen_against_the_exact_radius():
    """The middle class is the top class with p_1 ~ 0.6, most of the rest on class 0: Cohen's radius is
    small, but the sensitive target 2 is far. The exact cost-sensitive radius (distance to the region where
    g predicts 2; g depends on x_1 only) comes from the closed-form smoothed probabilities."""
    sigma = 1.0
    x1 = -0.45
    p = _smoothed(x1, sigma)
    assert p.argmax() == 1 and 0.5 < p[1] < 0.7
    # the first t > 0 where class 2 overtakes class 1 (class 0 only shrinks on the way; moving x_1 down
    # only makes class 2 less likely, and the other coordinates do not matter)
    exact = brentq(lambda t: _smoothed(x1 + t, sigma)[2] - _smoothed(x1 + t, sigma)[1], 0.0, 10.0)
    assert _smoothed(x1 + exact - 1e-3, sigma).argmax() != 2
    x = torch.zeros(1, 3, dtype=torch.float64)
    x[0, 0] = x1
    model = ThreeBands()
    selection = smoothing.sample_counts(model, x, sigma, 100, 100_000, seed=1)
    estimation = smoothing.sample_counts(model, x, sigma, 200_000, 100_000, seed=2)
    targets = np.array([[False, False, True]])
    top, radius, r1, r2 = method.certify_cs(selection, estimation, targets, sigma, 0.001)
    assert top[0] == 1
    np.testing.assert_allclose(r1[0], sigma * norm.ppf(p[1]), atol=0.02)       # Cohen's bound is ~ 0.3
    assert radius[0] < exact                                                   # valid
    assert radius[0] > r1[0] + 0.5                                             # and far tighter here
    # and r2 approaches its population value sigma/2 (Phi^-1(p_1) - Phi^-1(p_2))
    np.testing.assert_allclose(r2[0], sigma / 2 * (norm.ppf(p[1]) - norm.ppf(p[2])), atol=0.03)


def _loop_macer(logits, y, p, cost):
    """The CS-MACER loss written per example with scipy's Phi^-1 (no autograd): the reference."""
    logits = logits.detach().numpy()
    soft_cls = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    soft = np.exp(p.beta * logits) / np.exp(p.beta * logits).sum(-1, keepdims=True)
    total, active = 0.0, {"normal": 0, "seed": 0}
    for i, label in enumerate(y.numpy()):
        total -= np.log(soft_cls[i].mean(0)[label] + 1e-10)
        s = soft[i].mean(0)
        first, second = s[label], np.delete(s, label).max()
        r = norm.ppf(first) - norm.ppf(second)
        if np.isfinite(r) and 0 < r < p.gamma2:
            total += p.lbd * p.sigma / 2 * (p.gamma2 - r)
            active["normal"] += 1
        if cost is not None and label in cost.seeds:
            rc = norm.ppf(s.max()) - norm.ppf(s[list(cost.targets)].max())
            if np.isfinite(rc) and abs(rc) < p.gamma1:
                total += p.lbd * p.sigma / 2 * (p.gamma1 - rc)
                active["seed"] += 1
    return total / len(y), active


def test_macer_and_cs_macer_losses_match_a_per_example_reference():
    p = params_for("cs_rs", gauss_num=4, beta=1.0)   # beta = 1 keeps the soft radii inside the hinges
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 10)).double()
    x = torch.rand(12, 64, dtype=torch.float64)
    with torch.no_grad():   # mostly correctly classified (the normal hinge is active), four seed examples
        y = torch.cat([model(x[:8]).argmax(1), torch.tensor([3, 3, 3, 3])])
    cost = method.COST_MATRICES["single_pair"]
    for c in (None, cost):
        gen = torch.Generator().manual_seed(5)
        loss = method.macer_loss(model, x, y, p, gen, c)
        gen = torch.Generator().manual_seed(5)   # the same noise for the reference
        noisy = x.repeat_interleave(p.gauss_num, 0) + p.sigma * torch.randn((12 * p.gauss_num, 64), generator=gen)
        ref, active = _loop_macer(model(noisy).view(12, p.gauss_num, 10), y, p, c)
        assert active["normal"] >= 4 and active["seed"] >= (0 if c is None else 2)   # both hinges exercised
        np.testing.assert_allclose(float(loss.detach()), ref, rtol=1e-8)
    # the seed term is active here: CS-MACER's loss exceeds MACER's on the same noise
    gen_a, gen_b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert float(method.macer_loss(model, x, y, p, gen_a, cost).detach()) > float(method.macer_loss(model, x, y, p, gen_b).detach())


def test_cs_macer_gradient_step_moves_seed_mass_off_the_target():
    """A few steps on the seed term alone lower the smoothed probability of target 5 at seed examples 3."""
    p = params_for("cs_rs", gauss_num=8, lbd=1.0, beta=1.0, sigma=0.25)
    torch.manual_seed(1)
    model = torch.nn.Linear(64, 10)
    x = torch.rand(16, 64)
    y = torch.full((16,), 3)
    cost = method.COST_MATRICES["single_pair"]
    probe = x.repeat_interleave(32, 0) + 0.25 * torch.randn(16 * 32, 64, generator=torch.Generator().manual_seed(9))

    def target_mass():
        with torch.no_grad():
            return float(torch.softmax(model(probe), 1)[:, 5].mean())

    before = target_mass()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(20):
        # the difference CS-MACER - MACER on the same noise isolates the seed term
        loss = (method.macer_loss(model, x, y, p, torch.Generator().manual_seed(step), cost)
                - method.macer_loss(model, x, y, p, torch.Generator().manual_seed(step)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert target_mass() < 0.5 * before


def test_masked_model_never_predicts_targets_and_reweight_one_is_gaussian():
    p = params_for("cs_rs", epochs=2, hidden=[16], reweight=1.0)
    Xtr, ytr, Xte, yte = method.load_split(p, 0)
    assert Xtr.min() >= 0 and Xtr.max() <= 1 and len(Xte) == p.test_size
    cost = method.COST_MATRICES["multi_target"]
    gaussian = method.train_model(p, Xtr, ytr, "gaussian", None, 0)
    reweight = method.train_model(p, Xtr, ytr, "reweight", cost, 0)
    for a, b in zip(gaussian.parameters(), reweight.parameters()):
        torch.testing.assert_close(a, b)
    masked = method.MaskTargets(gaussian, cost.targets)
    counts = smoothing.sample_counts(masked, Xte[:20], p.sigma, 200, 10_000, seed=0)
    assert counts[:, list(cost.targets)].sum() == 0 and (counts.sum(1) == 200).all()
    # the shared forward of certification (the base network run once) gives every model its own logits
    models = [gaussian, masked, reweight]
    for model, logits in zip(models, method.shared_forward(models)(Xte)):
        torch.testing.assert_close(logits, model(Xte), rtol=0, atol=0)


def test_run_seed_rows_are_consistent():
    p = params_for("cs_rs")
    out = method.run_seed(p, seed=0)
    rows = out["rows"]
    models = {r["model"] for r in rows}
    assert {"gaussian", "macer", "cs_macer:single_pair", "masked_macer:multi_seed"} <= models
    for r in rows:
        assert 0.0 <= r["accuracy"] <= 1.0
    # Certify-CS never below Cohen on the same counts, at every radius
    key = lambda r: (r["model"], r["matrix"], r["radius"])   # noqa: E731
    cohen = {key(r): r["accuracy"] for r in rows if r["certificate"] == "cohen"}
    assert all(r["accuracy"] >= cohen[key(r)] for r in rows if r["certificate"] == "cs")
    assert out["pgd"]["violations"] <= out["pgd"]["attacked"]
