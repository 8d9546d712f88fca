"""LapSum soft top-k / soft rank and the baselines, against independent references:
bisection on b, finite differences (gradcheck), the O(n^2) pairwise rank, hard top-k, difftopk."""

import pytest
import torch
from conftest import params_for

from flows.lapsum import method as m

F64 = torch.float64


def _random_case(seed: int, batch: int = 3, n: int = 57):
    g = torch.Generator().manual_seed(seed)
    scale = float(10 ** (4 * torch.rand(1, generator=g) - 2))  # 1e-2 .. 1e2
    r = torch.randn(batch, n, generator=g, dtype=F64) * scale
    k = 0.5 + (n - 1) * torch.rand(batch, generator=g, dtype=F64)
    alpha = float(10 ** (3 * torch.rand(1, generator=g) - 2))  # 1e-2 .. 10
    return r, k, alpha


@pytest.mark.parametrize("seed", range(12))
def test_sum_is_k_and_matches_bisection(seed):
    r, k, alpha = _random_case(seed)
    p = m.lapsum_topk(r, k, alpha)
    assert torch.all((p >= 0) & (p <= 1))
    assert (p.sum(1) - k).abs().max() < 1e-8
    assert (p - m.bisection_topk(r, k, alpha)).abs().max() < 1e-10


@pytest.mark.parametrize("alpha", [1e-9, 1e-6, 1e-3, 1e3, 1e6])
def test_extreme_alpha_and_integer_k_stay_finite(alpha):
    """Integer k with gaps >> alpha made the plain closed form take log(0): b = +-inf."""
    g = torch.Generator().manual_seed(0)
    r = torch.stack([torch.randperm(50, generator=g) for _ in range(3)]).to(F64)
    p = m.lapsum_topk(r, 7.0, alpha)
    assert torch.isfinite(p).all()
    assert (p.sum(1) - 7.0).abs().max() < 1e-8


def test_ties_and_float32():
    r = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0, 2.0]], dtype=F64)
    p = m.lapsum_topk(r, 3.0, 1e-4)
    assert torch.allclose(p, torch.tensor([[2 / 3, 2 / 3, 2 / 3, 0, 0, 1]], dtype=F64), atol=1e-8)
    r32 = torch.randn(4, 1000, generator=torch.Generator().manual_seed(1))
    p32 = m.lapsum_topk(r32, 100.0, 0.1)
    assert (p32.sum(1) - 100).abs().max() < 1e-2


def test_gradcheck_closed_form_backward():
    r, _, _ = _random_case(3, batch=2, n=15)
    r = r.requires_grad_(True)
    k = torch.tensor([3.3, 9.0], dtype=F64, requires_grad=True)
    alpha = torch.tensor(0.7, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda r, k, a: m.lapsum_topk(r, k, a), (r, k, alpha), eps=1e-6, atol=1e-8, rtol=1e-5)


def test_backward_matches_autograd_of_bisection_reference():
    r, _, _ = _random_case(4, batch=2, n=30)
    k = torch.tensor([5.5, 20.0], dtype=F64)
    alpha = torch.tensor(0.4, dtype=F64)
    for i, x in enumerate((r, k, alpha)):
        def f(z, ours):
            args = [r, k, alpha]
            args[i] = z
            return (m.lapsum_topk if ours else m.bisection_topk)(*args)

        J1 = torch.autograd.functional.jacobian(lambda z: f(z, True), x.clone())
        J2 = torch.autograd.functional.jacobian(lambda z: f(z, False), x.clone())
        assert (J1 - J2).norm() / J2.norm() < 1e-8, ("r", "k", "alpha")[i]


def test_hard_limit_and_soft_limit():
    g = torch.Generator().manual_seed(5)
    r = torch.randn(4, 300, generator=g, dtype=F64)
    hard = m.hard_topk(r, 30)
    gaps = r.sort(dim=1).values.diff(dim=1).abs().min()
    alpha = float(gaps) / 100  # every gap is 100 alpha
    assert (m.lapsum_topk(r, 30.0, alpha) - hard).abs().sum(1).max() < 1e-10
    # huge alpha: every item gets k / n
    assert torch.allclose(m.lapsum_topk(r, 30.0, 1e6), torch.full_like(r, 0.1), atol=1e-6)


def test_monotone_in_r_and_shift_invariant():
    r, k, alpha = _random_case(6, batch=3, n=80)
    p = m.lapsum_topk(r, k, alpha)
    order = r.argsort(dim=1)
    assert (p.gather(1, order).diff(dim=1) >= -1e-12).all()
    J = torch.autograd.functional.jacobian(lambda x: m.lapsum_topk(x, k, alpha), r)[0, :, 0, :]  # row 0
    off = J - torch.diag(torch.diag(J))
    assert (torch.diag(J) > 0).all() and (off <= 1e-15).all()
    assert torch.allclose(m.lapsum_topk(r + 3.7, k, alpha), p, atol=1e-10)


def test_soft_rank_matches_pairwise_sum_and_its_gradient():
    g = torch.Generator().manual_seed(7)
    r = torch.randn(3, 40, generator=g, dtype=F64, requires_grad=True)
    v = torch.randn(3, 40, generator=g, dtype=F64)
    ours, ref = m.lapsum_rank(r, 0.3), m.naive_rank(r, 0.3)
    assert (ours - ref).abs().max() < 1e-10
    (g1,) = torch.autograd.grad((ours * v).sum(), r)
    (g2,) = torch.autograd.grad((ref * v).sum(), r)
    assert (g1 - g2).abs().max() < 1e-10
    hard_rank = r.detach().argsort(1).argsort(1).to(F64)
    assert (m.lapsum_rank(r.detach(), 1e-6) - hard_rank).abs().max() < 1e-8
    desc = m.lapsum_rank(r.detach(), 1e-6, descending=True)
    assert (desc - (39 - hard_rank)).abs().max() < 1e-8


def test_baselines_sum_to_k():
    g = torch.Generator().manual_seed(8)
    r = torch.randn(3, 100, generator=g, dtype=F64)
    for name in m.METHODS:
        p = m.topk_fn(name, 0.5, 300)(r, 10)
        assert (p.sum(1) - 10).abs().max() < 1e-8, name
    sk = m.sinkhorn_topk(r, 10.0, eps=0.5, n_iter=2000)  # converged: memberships in [0, 1]
    assert sk.max() < 1 + 1e-6 and sk.min() >= 0
    # two anchors: the converged plan is a logistic in r with slope 2 / eps and a per-row offset
    offset = torch.logit(sk) - 2 * r / 0.5
    assert (offset - offset.mean(1, keepdim=True)).abs().max() < 1e-6


def test_neuralsort_and_softsort_match_difftopk():
    difftopk = pytest.importorskip("difftopk")
    g = torch.Generator().manual_seed(9)
    r = torch.randn(2, 12, generator=g)
    ns = difftopk.NeuralSort(tau=0.7)(r)  # (B, item, rank), ascending ranks
    assert (m.neuralsort_topk(r, 4, 0.7) - ns[:, :, -4:].sum(-1)).abs().max() < 1e-5
    ss = difftopk.SoftSort(tau=0.7)(r)  # (B, rank, item), descending ranks
    assert (m.softsort_topk(r, 4, 0.7) - ss[:, :4, :].sum(1)).abs().max() < 1e-5


def test_run_seed_is_deterministic():
    p = params_for("lapsum", correctness_n=30, alpha_hard=1e-3, select_n=60, select_ks=[6], select_steps=3,
                   select_batch=2, select_lr=3e-3, select_hidden=8, select_noise=0.3, tau=1.0,
                   sinkhorn_iter_train=5, methods=list(m.METHODS), digits_steps=3, digits_alpha=1.0,
                   select_budget_s=0.01, control_budget_frac=0.25)

    def strip(out):
        out["select"] = [{k: v for k, v in row.items() if k != "wall_s"} for row in out["select"]]
        out.pop("select_budget")  # CPU-time budgets: the steps taken depend on the machine
        return out

    a, b = strip(m.run_seed(p, 3)), strip(m.run_seed(p, 3))
    assert a == b
    assert a["correctness"]["max_abs_sum_error"] < 1e-8
    assert a["correctness"]["grad_rel_error_fd"] < 1e-4
    other = m.learn_to_select("lapsum", 6, 4, n=60, steps=3, batch=2, hidden=8, sinkhorn_iter=5)
    assert other["precision_at_k"] != a["select"][0]["precision_at_k"] or other["final_loss"] != a["select"][0]["final_loss"]


def test_params_reject_inconsistent_config():
    from flows.lapsum.params import SMOKE, Params

    good = {"seeds": 1, "methods": ["lapsum", "softmax"], "tau": 1.0, "correctness_n": 40, "alpha_hard": 1e-3,
            "scaling_ns": [100, 1000], "scaling_batch": 1, "scaling_reps": 1, "timing_threads": 1,
            "quadratic_cap": 1000, "sinkhorn_cap": 1000, "sinkhorn_iter_timing": 5, "n_compare": 1000,
            "select_n": 50, "select_ks": [5], "select_steps": 1, "select_budget_s": 0.1, "control_budget_frac": 0.25,
            "select_batch": 1, "select_lr": 0.01,
            "select_hidden": 4, "select_noise": 0.3, "sinkhorn_iter_train": 5, "digits_steps": 1,
            "digits_alpha": 1.0}
    Params.model_validate({**good, **SMOKE})
    for bad in ({"methods": ["softmax", "sinkhorn"]}, {"select_ks": [50]}, {"scaling_ns": [100, 300]},
                {"n_compare": 500}, {"methods": ["lapsum", "lapsum"]}, {"methods": ["lapsum", "bogus"]},
                {"scaling_ns": [1000, 100]}, {"control_budget_frac": 1.0}, {"select_budget_s": 0.0}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})


def test_budget_limits_steps_and_control_gets_a_fraction():
    """The equal-budget run (its stopping rule is tested in test_timing) gives each method and the control
    their own budget, and the control's quarter budget takes fewer steps; a learner stepped by hand equals the
    equal-steps run."""
    kw = dict(n=60, batch=2, hidden=8, sinkhorn_iter=5)
    learner = m.SelectLearner("lapsum", 6, 0, **kw)
    for _ in range(4):
        learner.step()
    by_hand, run = learner.result(), m.learn_to_select("lapsum", 6, 0, steps=4, **kw)
    assert by_hand == {key: value for key, value in run.items() if key != "wall_s"} and run["steps"] == 4
    p = params_for("lapsum", correctness_n=30, select_n=60, select_ks=[6], select_hidden=8, sinkhorn_iter_train=5,
                   methods=["lapsum", "softmax"], select_budget_s=0.2, control_budget_frac=0.25)
    rows = m.select_budget(p, 1)
    assert [(r["method"], r["budget"]) for r in rows] == [("lapsum", "full"), ("softmax", "full"), ("lapsum", "control")]
    assert all(r["k"] == 6 for r in rows)
    assert rows[2]["steps"] < rows[0]["steps"]


def test_hard_limit_claim_and_its_softmax_control():
    """On N(0,1) scores the LapSum L1 to the hard top-k falls with alpha; the softmax control at the same alpha
    is far from the top-k (it tends to k times the argmax)."""
    c = m.correctness(0, n=60, n_grad=6, alpha_hard=1e-3)
    assert c["l1_softmax_to_hard_normal_at_alpha_hard"] > 1.0
    sweep = {row["alpha"]: row["l1_to_hard"] for row in c["alpha_sweep_normal_scores"]}
    assert sweep[1e-4] <= sweep[1e-2] <= sweep[1.0]
    assert c["l1_to_hard_normal_at_alpha_hard"] == pytest.approx(sweep[1e-3])
