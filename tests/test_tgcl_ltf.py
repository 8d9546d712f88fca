"""tgcl_ltf: LTF's selection, regulariser and the baselines' pieces against independent references (smoke run,
determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.tgcl_ltf import method
from tasks.two_sample import mmd_rbf


def _kernel(x: np.ndarray, gamma: float) -> torch.Tensor:
    t = torch.from_numpy(x)
    return method.rbf_kernel(t, t, gamma)


@pytest.mark.parametrize("with_penalty", [False, True])
def test_greedy_selection_minimises_mmd_step_by_step(with_penalty):
    """Each greedy step adds argmin_i (|S|+1)·MMD²(S ∪ {i}, X) + penalty_i, with MMD² from tasks.two_sample."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(25, 3)), rng.normal(3.0, 0.5, size=(15, 3))])
    gamma = 0.3
    bandwidth = np.sqrt(1 / (2 * gamma))            # exp(-|d|²/(2h²)) = exp(-gamma |d|²)
    penalty = rng.random(len(x)) if with_penalty else np.zeros(len(x))
    chosen = method.select_prototypes(_kernel(x, gamma), 8, torch.from_numpy(penalty) if with_penalty else None)
    selected: list[int] = []
    for _ in range(8):
        candidates = [i for i in range(len(x)) if i not in selected]
        cost = [(len(selected) + 1) * mmd_rbf(x[selected + [i]], x, bandwidth) + penalty[i] for i in candidates]
        selected.append(candidates[int(np.argmin(cost))])
    assert chosen.tolist() == selected


def test_greedy_selection_covers_both_modes_and_a_huge_loss_weight_picks_the_lowest_losses():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=(60, 2)), rng.normal(6.0, 0.3, size=(20, 2))])
    K = _kernel(x, 0.5)
    picks = method.select_prototypes(K, 8)
    share = (picks >= 60).mean()
    assert 0.1 <= share <= 0.5                      # both modes, roughly in proportion (1/4 of the mass)
    loss = torch.from_numpy(rng.random(len(x)))
    lowest = method.select_prototypes(K, 8, 1e6 * loss)
    assert lowest.tolist() == torch.argsort(loss)[:8].tolist()


def test_mmd_matches_the_numpy_reference_and_has_gradients():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(30, 4)), rng.normal(0.5, 1.2, size=(20, 4))
    gamma = 0.1
    at = torch.from_numpy(a).requires_grad_()
    value = method.mmd2(at, torch.from_numpy(b), gamma)
    assert float(value.detach()) == pytest.approx(mmd_rbf(a, b, bandwidth=np.sqrt(1 / (2 * gamma))), rel=1e-9, abs=1e-12)
    value.backward()
    assert at.grad.abs().sum() > 0
    assert float(method.mmd2(torch.from_numpy(b), torch.from_numpy(b), gamma)) == pytest.approx(0.0, abs=1e-12)


def test_distillation_is_the_kl_divergence_up_to_the_teacher_entropy():
    g = torch.Generator().manual_seed(0)
    old, new = torch.randn(50, 4, generator=g), torch.randn(50, 4, generator=g)
    T = 2.0
    kl = torch.distributions.kl_divergence(torch.distributions.Categorical(logits=old / T),
                                           torch.distributions.Categorical(logits=new / T)).mean()
    assert float(method.distillation(old, new, T) - method.distillation(old, old, T)) == pytest.approx(float(kl), 1e-5)


def test_forgetting_by_hand():
    # after task 0: group 0 at 0.9; after task 1: 0.7, 0.8; after task 2: 0.5, 0.6, 0.9
    groups = [[0.9], [0.7, 0.8], [0.5, 0.6, 0.9]]
    assert method.forgetting(groups) == pytest.approx(((0.9 - 0.5) + (0.8 - 0.6)) / 2)


def test_stream_inputs_are_strictly_past_events_of_the_source():
    p = params_for("tgcl_ltf")
    s = method.make_stream(p, seed=0)
    assert (s.delta_t[s.valid] > 0).all()           # strictly earlier events only (times are distinct a.s.)
    assert (s.neighbour_x[~s.valid] == 0).all()
    assert set(np.unique(s.period)) == set(range(p.n_tasks))
    # classes appear at their task's onset: period i holds only classes < (i + 1) · classes_per_task
    for i in range(p.n_tasks):
        assert s.y[torch.from_numpy(s.period == i)].max() < (i + 1) * p.classes_per_task


def test_every_replay_method_stores_exactly_the_budget_and_icarl_starts_at_the_mean():
    p = params_for("tgcl_ltf")
    s = method.make_stream(p, seed=1)
    torch.manual_seed(0)
    model = method.Backbone(p, p.n_tasks * p.classes_per_task)
    pool = np.flatnonzero((s.period == 1) & ~s.is_test & (s.y.numpy() < p.classes_per_task))
    for name in ("er", "icarl", "ltf"):
        replayed, dist = method.select_memory(name, p, model, s, pool, p.classes_per_task, np.random.default_rng(0))
        stored = np.union1d(replayed, dist)
        assert np.isin(dist, replayed).all()              # at equal memory LTF replays its distribution subset too
        assert len(stored) == len(replayed)
        assert np.isin(stored, pool).all()
        assert np.bincount(s.y[stored].numpy(), minlength=p.classes_per_task).tolist() == \
            [p.memory_per_class] * p.classes_per_task
        if name == "ltf":
            assert len(dist) == p.ltf_distribution_per_class * p.classes_per_task
        if name == "icarl":
            with torch.no_grad():
                cls0 = pool[s.y[pool].numpy() == 0]
                z = model.embed(s, torch.from_numpy(cls0))
            assert replayed[0] == cls0[int((z - z.mean(0)).norm(dim=1).argmin())]


def test_run_seed_rows():
    p = params_for("tgcl_ltf")
    rows = method.run_seed(p, seed=0)
    by = {r["method"]: r for r in rows}
    assert set(by) == set(method.METHODS) | {"drift_probe"}
    budget = p.memory_per_class * (p.n_tasks - 1) * p.classes_per_task
    assert {by[m]["stored_events"] for m in method.EQUAL_MEMORY} == {budget}
    n_old = (p.n_tasks - 1) * p.classes_per_task
    assert budget <= by["ltf_official"]["stored_events"] <= budget + p.ltf_distribution_per_class * n_old
    assert by["ewc"]["stored_events"] == by["finetune"]["stored_events"] == 0
    assert by["ewc"]["weight"] in p.ewc_lambdas and by["lwf"]["weight"] in p.lwf_weights
    # task 0 is shared: every method starts from the same model
    assert len({by[m]["acc_task0"] for m in method.METHODS}) == 1
    assert all(0 <= by[m]["avg_accuracy"] <= 1 for m in method.METHODS)


def test_fisher_is_the_mean_of_per_event_squared_gradients():
    """Not the squared gradient of a batch mean: each event's own gradient, squared, then averaged."""
    p = params_for("tgcl_ltf")
    s = method.make_stream(p, seed=2)
    torch.manual_seed(0)
    model = method.Backbone(p, p.n_tasks * p.classes_per_task)
    events = np.flatnonzero((s.period == 0) & ~s.is_test)[:6]
    fisher = method.diagonal_fisher(model, s, events, p.classes_per_task)
    w = model.head.weight
    squares = []
    for e in events:
        idx = torch.tensor([e])
        g, = torch.autograd.grad(torch.nn.functional.cross_entropy(
            model.logits(model.embed(s, idx), p.classes_per_task), s.y[idx]), w)
        squares.append(g ** 2)
    assert torch.allclose(fisher["head.weight"], torch.stack(squares).mean(0))
    idx = torch.from_numpy(events)
    batch, = torch.autograd.grad(torch.nn.functional.cross_entropy(
        model.logits(model.embed(s, idx), p.classes_per_task), s.y[idx]), w)
    assert fisher["head.weight"].sum() > (batch ** 2).sum()   # the batch-mean version is smaller


def test_validation_events_are_held_out_from_test_and_training():
    p = params_for("tgcl_ltf")
    s = method.make_stream(p, seed=0)
    assert s.is_val.any() and not (s.is_val & s.is_test).any()
