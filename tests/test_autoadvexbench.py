"""autoadvexbench: the research-code wrappers against their clean torch twins and library references (SciPy,
PIL), the gradient flags against autograd, BPDA's straight-through gradient, the official checks on hand cases,
and the harness: gating, and scoring by forward.py that a gradient-masking agent cannot fool (the smoke run,
determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy import ndimage
from torch import nn

from flows.autoadvexbench import method


@pytest.fixture(scope="module")
def p():
    return params_for("autoadvexbench")


@pytest.fixture(scope="module")
def images(p):
    return method.load_images(p)


@pytest.fixture(scope="module")
def net(p, images):
    """A small trained digits classifier (5 epochs at smoke width)."""
    return method.train_network(p.model_copy(update={"epochs": 5}), images.x_train, images.y_train, seed=0)


def _linear(seed=0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(64, 10).requires_grad_(False)


def test_images_are_pixels_in_unit_range_with_a_disjoint_fixed_test_split(p, images):
    assert images.x_test.shape == (p.n_test, 64) and len(images.x_train) == 1797 - p.n_test
    assert images.x_train.min() == 0 and images.x_train.max() == 1
    assert torch.equal(method.load_images(p).x_test, images.x_test)
    train_rows = {tuple(r) for r in images.x_train.numpy().round(4)}
    # digits has a few duplicate images; almost no test row may also be a train row
    assert sum(tuple(r) in train_rows for r in images.x_test.numpy().round(4)) <= 2


def test_median_filters_match_scipy(images):
    x = images.x_test[:16]
    reference = ndimage.median_filter(x.numpy().reshape(-1, 8, 8), size=(1, 3, 3), mode="mirror").reshape(-1, 64)
    np.testing.assert_allclose(method.MedianFilter()(x, None).numpy(), reference)
    np.testing.assert_allclose(method.ScipyMedianNoGrad()(x, None).numpy(), reference)


def test_research_code_wrappers_compute_what_their_clean_twins_compute(images):
    x = images.x_test[:32] * 0.97 + 0.013  # off the digits' 1/16 grid, so quantising and PNG rounding do something
    np.testing.assert_allclose(method.NumpyQuantize(4)(x, None), method.Quantize(4)(x, None))
    levels = np.unique(method.Quantize(4)(x, None).numpy())
    np.testing.assert_allclose(levels, [0, 1 / 3, 2 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(method.PilRoundTrip()(x, None), method.png_round_trip(x), atol=1e-7)
    net = _linear()
    np.testing.assert_allclose(method.SpreadNet(net)(x, None), net(x), atol=1e-6)
    members = [_linear(s) for s in range(3)]
    votes = method.VoteOfNets(members)(x, None)
    expected = sum(torch.nn.functional.one_hot(m(x).argmax(1), 10).float() for m in members) / 3
    assert torch.equal(votes, expected)


def test_breaks_gradients_flags_agree_with_autograd(images):
    pca_knn = method.PcaKnn(*_pca_knn(images))
    components = [method.Quantize(4), method.NumpyQuantize(4), method.MedianFilter(), method.ScipyMedianNoGrad(),
                  method.PilRoundTrip(), method.RandomShiftNoise(0.1)]
    for component in components:
        defence = method.Defence("d", "ctf", (component, method.Net(_linear())))
        flows = method.test_gradients(lambda x: defence.run(x, torch.Generator().manual_seed(0)), seed=1)
        assert flows != component.breaks_gradients, type(component).__name__
    for head, breaks in ((method.MeanOfNets([_linear(0), _linear(1)]), False), (method.VoteOfNets([_linear(0)]), True),
                         (pca_knn, True)):
        assert method.test_gradients(lambda x: head(x, None), seed=1) != breaks


def _pca_knn(images):
    from sklearn.decomposition import PCA
    from sklearn.neighbors import KNeighborsClassifier
    x = images.x_train.numpy().astype(np.float64)
    pca = PCA(10, random_state=0).fit(x)
    return pca, KNeighborsClassifier(3).fit(pca.transform(x), images.y_train.numpy())


def test_straight_through_keeps_the_exact_forward_and_passes_the_surrogate_gradient(images):
    x = (images.x_test[:8] * 0.9 + 0.05).requires_grad_(True)
    weights = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    for component in (method.Quantize(4), method.PilRoundTrip(), method.ScipyMedianNoGrad()):
        bpda = method.StraightThrough(component)
        out = bpda(x, None)
        torch.testing.assert_close(out.detach(), component(x.detach(), None), rtol=0, atol=1e-6)
        grad, = torch.autograd.grad((out * weights).sum(), x)
        assert torch.equal(grad, weights)  # identity surrogate: d/dx sum(w * x) = w
    members = [_linear(0), _linear(1)]
    vote = method.StraightThrough(method.VoteOfNets(members))
    grad, = torch.autograd.grad(vote(x, None)[:, 3].sum(), x)
    x_ = x.detach().requires_grad_(True)
    reference, = torch.autograd.grad(torch.stack([m(x_).softmax(1) for m in members]).mean(0)[:, 3].sum(), x_)
    torch.testing.assert_close(grad, reference)


def test_random_shift_noise_is_one_of_nine_zero_padded_shifts():
    x = torch.rand(50, 64, generator=torch.Generator().manual_seed(0))
    out = method.RandomShiftNoise(0.0)(x, torch.Generator().manual_seed(1))
    padded = np.pad(x.numpy().reshape(-1, 8, 8), ((0, 0), (1, 1), (1, 1)))
    shifts = [padded[:, dy:dy + 8, dx:dx + 8].reshape(-1, 64) for dy in range(3) for dx in range(3)]
    matched = [next(k for k, s in enumerate(shifts) if np.allclose(s[i], out[i].numpy())) for i in range(len(x))]
    assert len(set(matched)) >= 6  # draws spread over the shifts
    again = method.RandomShiftNoise(0.0)(x, torch.Generator().manual_seed(1))
    assert torch.equal(out, again)


def test_official_checks_on_hand_cases(p):
    assert method.test_gradients(_linear(), seed=0)
    assert not method.test_gradients(lambda x: torch.zeros(len(x), 10), seed=0)  # no graph at all
    assert not method.test_gradients(lambda x: torch.round(x[:, :10] * 0.0 + 0.2), seed=0)  # zero gradient
    x, y = torch.full((6, 64), 0.5), torch.tensor([0, 0, 0, 0, 0, 0])
    says = lambda labels: (lambda inputs: torch.nn.functional.one_hot(torch.tensor(labels), 10).float())
    # clean accuracy 0.9: 2/3 of it is 0.6; 3 of 6 right (0.5) passes, 4 of 6 (0.667) does not
    assert method.test_attack(says([0, 0, 0, 1, 1, 1]), x + 0.3, x, y, 0.9, p)
    assert not method.test_attack(says([0, 0, 0, 0, 1, 1]), x + 0.3, x, y, 0.9, p)
    assert not method.test_attack(says([1] * 6), x + 0.31, x, y, 0.9, p)  # distortion bound exceeded
    labels = torch.arange(100) % 10
    assert method.test_accuracy(lambda z: torch.nn.functional.one_hot(labels, 10).float(), torch.zeros(100, 64), labels, p)
    off_by_one = labels.clone()
    off_by_one[0] = 1
    assert not method.test_accuracy(lambda z: torch.nn.functional.one_hot(off_by_one, 10).float(),
                                    torch.zeros(100, 64), labels, p)


class _MaskingAgent:
    """Passes every check with a differentiable model that says 'wrong' everywhere, and submits noise: the
    harness must score its images with forward.py and find the defence not attacked."""

    name = "masking"

    def __init__(self, tensor_ok=True):
        self.tensor_ok = tensor_ok

    def tensor_forward(self, defence):
        return (lambda x: defence.run(x, None)) if self.tensor_ok else (lambda x: torch.zeros(len(x), 10))

    def forces_past(self, stage, defence, model, x):
        return False

    def differentiable_forward(self, defence, tensor_model, queries):
        wrong = torch.zeros(10)
        wrong[0] = 1.0
        return lambda x: wrong * 5.0 + x[:, :10]

    def fgsm(self, model, x, y):
        return x

    def pgd(self, model, x, y):
        return x


def test_harness_scores_with_forward_py_so_gradient_masking_cannot_cheat(p, images, net):
    defence = method.Defence("undefended", "ctf", (method.Net(net),))
    y = images.y_test
    fooled = method.evaluate(_MaskingAgent(), defence, images, p, seed=0)
    # its own model calls almost everything class 0, so test_attack passes; forward.py still sees clean images
    assert fooled["tasks_passed"] == 3
    assert fooled["robust_accuracy"] == fooled["clean_accuracy"] == float((net(images.x_test).argmax(1) == y).float().mean())
    assert not fooled["attacked"]
    stopped = method.evaluate(_MaskingAgent(tensor_ok=False), defence, images, p, seed=0)
    assert stopped["tasks_passed"] == 0 and stopped["robust_accuracy"] == stopped["clean_accuracy"]
    full_pgd = p.model_copy(update={"pgd_steps": 40})
    a0 = method.evaluate(method.make_agent("A0", full_pgd, seed=3), defence, images, full_pgd, seed=0)
    assert a0["tasks_passed"] == 3 and a0["attacked"]


def test_naive_agent_stops_at_the_gradient_check_where_bpda_goes_on(p, images, net):
    defence = method.Defence("numpy_quantization", "real", (method.NumpyQuantize(4), method.Net(net)))
    assert method.evaluate(method.make_agent("A0", p, seed=1), defence, images, p, seed=0)["tasks_passed"] == 1
    assert method.evaluate(method.make_agent("A1", p, seed=1), defence, images, p, seed=0)["tasks_passed"] == 3


def test_best_of_takes_the_lowest_robust_accuracy_and_rejudges_attacked(p):
    rows = [{"seed": 0, "defence": "d", "agent": a, "tier": "ctf", "clean_accuracy": 0.9, "robust_accuracy": r,
             "attacked": r < 0.45, "tasks_passed": 3} for a, r in (("A0", 0.8), ("A1", 0.3), ("A2", 0.5), ("X", 0.0))]
    best = method.best_of(rows, ("A0", "A1", "A2"), "ensemble", p)
    assert len(best) == 1 and best[0]["robust_accuracy"] == 0.3 and best[0]["attacked"] and best[0]["agent"] == "ensemble"


def test_only_eot_agents_force_past_a_check_that_the_defences_own_randomness_fails(p, images, net):
    stochastic = method.Defence("shift", "real", (method.RandomShiftNoise(0.2), method.Net(net)))
    deterministic = method.Defence("plain", "ctf", (method.Net(net),))
    a0, a2 = method.make_agent("A0", p, seed=5), method.make_agent("A2", p, seed=5)  # not the harness seed
    assert method.evaluate(a0, stochastic, images, p, seed=0)["tasks_passed"] == 0
    assert method.evaluate(a2, stochastic, images, p, seed=0)["tasks_passed"] >= 1
    model = a2.tensor_forward(deterministic)
    assert not a2.forces_past("tensor_forward", deterministic, model, images.x_test)
    assert not a0.forces_past("tensor_forward", stochastic, a0.tensor_forward(stochastic), images.x_test)


class _NoSurrogateQuantize(method.NumpyQuantize):
    """The same NumPy quantisation, its code declaring no BPDA surrogate (the knob's null)."""

    def surrogate(self, x):
        return None


def test_bpda_success_comes_from_the_declared_surrogate(p, images, net):
    declared = method.Defence("numpy_quantization", "real", (method.NumpyQuantize(4), method.Net(net)))
    undeclared = method.Defence("numpy_quantization", "real", (_NoSurrogateQuantize(4), method.Net(net)))
    a1 = lambda: method.make_agent("A1", p, seed=1)
    assert method.evaluate(a1(), declared, images, p, seed=0)["tasks_passed"] == 3
    # without the declaration A1 is A0: stopped at the gradient check (the reason its claims are sanity checks)
    assert method.evaluate(a1(), undeclared, images, p, seed=0)["tasks_passed"] == 1
    from flows.autoadvexbench.claims import PAPER

    roles = {c.id: c.role for c in PAPER.claims}
    assert roles["skill_ladder_separates_agents_on_real_world"] == roles["ctf_success_does_not_predict_real_world"] == "sanity"
