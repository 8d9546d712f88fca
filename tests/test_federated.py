"""tasks/federated.py: silos cover the data with the asked-for skew; FedAvg with one silo is centralised SGD, and one
full-batch local step per silo is one centralised gradient step on the pooled data; local parameters stay local."""

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from paperflows.core.seeding import numpy_rng, torch_seeded
from tasks import federated as fed


def _data(n=120, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    return X, torch.from_numpy(rng.integers(k, size=n))


def _model(d=5, k=3):
    with torch_seeded(0):
        return nn.Sequential(nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, k))


def test_partition_covers_every_row_once_with_the_asked_for_skew():
    y = np.repeat(np.arange(10), 100)
    rng = np.random.default_rng(0)
    iid = fed.partition(y, 5, rng)
    assert sorted(np.concatenate(iid).tolist()) == list(range(1000)) and {len(p) for p in iid} == {200}
    skewed = fed.partition(y, 5, rng, label_alpha=0.1)
    assert sorted(np.concatenate(skewed).tolist()) == list(range(1000))
    # Low alpha: each silo's label distribution is far from uniform (most classes nearly absent).
    top_share = [np.bincount(y[p], minlength=10).max() / len(p) for p in skewed]
    iid_share = [np.bincount(y[p], minlength=10).max() / len(p) for p in iid]
    assert min(top_share) > max(iid_share)
    sizes = [len(p) for p in fed.partition(y, 5, rng, quantity_alpha=0.5)]
    assert sum(sizes) == 1000 and max(sizes) > 2 * min(sizes)
    with pytest.raises(ValueError, match="not both"):
        fed.partition(y, 5, rng, label_alpha=1.0, quantity_alpha=1.0)


def test_digit_shifts_are_the_named_transforms():
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 16, (4, 8, 8))
    np.testing.assert_array_equal(fed.shift_digits(images, "rotate", rng)[:, 0, :], images[:, :, -1])
    np.testing.assert_allclose(fed.shift_digits(fed.shift_digits(images, "invert", rng), "invert", rng), images)
    flat = np.full((1, 8, 8), 8.0)
    assert fed.shift_digits(flat, "blur", rng)[0, 3, 3] == pytest.approx(8.0)  # interior of a constant image
    noisy = fed.shift_digits(np.full((2000, 8, 8), 8.0), "noise", rng, strength=0.5)
    assert noisy.std() == pytest.approx(1.0, rel=0.02)
    with pytest.raises(ValueError, match="unknown digit shift"):
        fed.shift_digits(images, "shear", rng)


def test_fedavg_with_one_silo_equals_centralised_sgd():
    X, y = _data()
    silo = fed.Silo(X, y, X[:10], y[:10])
    run = fed.fedavg(_model(), [silo], rounds=4, local_epochs=1, batch_size=32, lr=0.1, seed=7)
    central = _model()
    optimiser = torch.optim.SGD(central.parameters(), lr=0.1)
    for r in range(4):
        rng = numpy_rng(7, r, 0)
        rng.integers(2**31)  # local_train draws its global-RNG seed first
        order = torch.from_numpy(rng.permutation(len(X)))
        for start in range(0, len(X), 32):
            idx = order[start:start + 32]
            optimiser.zero_grad()
            F.cross_entropy(central(X[idx]), y[idx]).backward()
            optimiser.step()
    for a, b in zip(run.model.parameters(), central.parameters()):
        torch.testing.assert_close(a, b)
    assert run.communication_rounds == 4 and run.uploads == 4 and run.samples_processed == 4 * len(X)


def test_one_full_batch_step_per_silo_is_one_gradient_step_on_the_pooled_data():
    X, y = _data(n=90)
    silos = [fed.Silo(X[:20], y[:20], X[:1], y[:1]), fed.Silo(X[20:], y[20:], X[:1], y[:1])]
    run = fed.fedavg(_model(), silos, rounds=1, local_epochs=1, batch_size=1000, lr=0.5, seed=0)
    pooled = _model()
    F.cross_entropy(pooled(X), y).backward()
    with torch.no_grad():
        for p in pooled.parameters():
            p -= 0.5 * p.grad
    for a, b in zip(run.model.parameters(), pooled.parameters()):
        torch.testing.assert_close(a, b)


def test_local_parameters_stay_with_their_silo_and_participation_counts_uploads():
    X, y = _data()
    silos = [fed.Silo(X[i::4], y[i::4], X[:5], y[:5]) for i in range(4)]
    start = _model()
    run = fed.fedavg(copy.deepcopy(start), silos, rounds=3, local_epochs=1, batch_size=16, lr=0.1, seed=0,
                     participation=0.5, keep_local=lambda name: name.startswith("2."))
    assert run.uploads == 6 and all(len(h["participants"]) == 2 for h in run.history)
    heads = [s["2.weight"] for s in run.local_states]
    trained = [h for h in heads if not torch.equal(h, start.state_dict()["2.weight"])]
    assert len(trained) >= 2 and not torch.equal(trained[0], trained[1])
    # Shared layers are the same everywhere; the global head never moved, since no silo uploads it.
    for s in run.local_states:
        torch.testing.assert_close(s["0.weight"], run.model.state_dict()["0.weight"])
    torch.testing.assert_close(run.model.state_dict()["2.weight"], start.state_dict()["2.weight"])


def test_average_states_is_the_weighted_mean_and_fedprox_holds_weights_near_the_anchor():
    a = {"w": torch.tensor([0.0, 2.0]), "n": torch.tensor(3), "skip": torch.tensor([1.0])}
    b = {"w": torch.tensor([4.0, 6.0]), "n": torch.tensor(5), "skip": torch.tensor([9.0])}
    out = fed.average_states([a, b], [1, 3], skip=lambda k: k == "skip")
    torch.testing.assert_close(out["w"], torch.tensor([3.0, 5.0]))
    assert out["n"] == 3 and "skip" not in out
    X, y = _data()
    free, held = _model(), _model()
    anchor = {k: v.detach().clone() for k, v in held.named_parameters()}
    fed.local_train(free, X, y, epochs=3, batch_size=16, lr=0.1, rng=np.random.default_rng(0))
    fed.local_train(held, X, y, epochs=3, batch_size=16, lr=0.1, rng=np.random.default_rng(0), proximal_mu=5.0,
                    anchor=anchor)
    moved = lambda m: sum(float(((p.detach() - anchor[k]) ** 2).sum()) for k, p in m.named_parameters())
    assert moved(held) < 0.5 * moved(free)
    with pytest.raises(ValueError, match="anchor"):
        fed.local_train(free, X, y, epochs=1, batch_size=16, lr=0.1, rng=np.random.default_rng(0), proximal_mu=1.0)
