"""tasks/selection.py and tasks/data_defects.py against brute force and exact counts."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.spatial.distance import cdist
from scipy.stats import entropy

from paperflows.core.seeding import torch_seeded
from tasks import data_defects as dd
from tasks import selection as sel
from tasks.train import mlp, train


def _logits_and_labels(n=40, k=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g, dtype=torch.float64) * 2, torch.randint(0, k, (n,), generator=g)


def test_signals_match_per_sample_cross_entropy_softmax_entropy_and_margin():
    logits, labels = _logits_and_labels()
    s = sel.per_sample_signals(logits, labels)
    assert list(s.columns) == list(sel.SIGNAL_COLUMNS)
    np.testing.assert_allclose(s["loss"], F.cross_entropy(logits, labels, reduction="none").numpy(), rtol=1e-12)
    p = torch.softmax(logits, 1).numpy()
    np.testing.assert_allclose(s["entropy"], entropy(p, axis=1), rtol=1e-10)
    L = logits.numpy()
    for i in range(len(L)):
        others = np.delete(L[i], labels[i])
        assert s["margin"][i] == pytest.approx(L[i, labels[i]] - others.max())
        assert s["correct"][i] == (L[i].argmax() == labels[i])
    np.testing.assert_allclose(s["el2n"], np.linalg.norm(p - np.eye(5)[labels], axis=1), rtol=1e-10)


def test_grad_norm_equals_the_autograd_norm_of_the_last_layer_gradient():
    g = torch.Generator().manual_seed(1)
    features = torch.randn(12, 7, generator=g, dtype=torch.float64)
    head = torch.nn.Linear(7, 4).double()
    labels = torch.randint(0, 4, (12,), generator=g)
    s = sel.per_sample_signals(head(features), labels, features)
    for i in range(12):
        head.zero_grad()
        F.cross_entropy(head(features[i:i + 1]), labels[i:i + 1]).backward()
        norm = torch.sqrt(head.weight.grad.pow(2).sum() + head.bias.grad.pow(2).sum())
        assert s["grad_norm"][i] == pytest.approx(float(norm), rel=1e-10)


def test_knn_density_equals_brute_force_mean_distance():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(60, 3))
    d = cdist(emb, emb)
    np.fill_diagonal(d, np.inf)
    expected = np.sort(d, axis=1)[:, :4].mean(axis=1)
    np.testing.assert_allclose(sel.knn_density(emb, 4), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="k must be"):
        sel.knn_density(emb, 60)


def test_forgetting_counts_known_case():
    correct = np.array([[1, 0, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]], dtype=bool)
    # sample 0 forgets at 0->1 and 2->3; sample 1 is never learned (= epochs); sample 2 forgets once; 3 never learned
    np.testing.assert_array_equal(sel.forgetting_counts(correct), [2, 4, 1, 4])


def _pool(n=90, d=6, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    return X, (X[:, 0] + X[:, 1] > 0).long() + (X[:, 2] > 1).long()


def _model(seed=0):
    with torch_seeded(seed):
        return mlp(6, [16], 3)


def test_budget_counts_exactly_the_samples_trained_and_scored():
    X, y = _pool()
    run = sel.train_with_selection(_model(), X, y, sel.random_subset(0.3), epochs=5, reselect_every=2,
                                   batch_size=8, lr=1e-2, seed=3)
    assert run.budget.samples_seen == 5 * 27
    assert run.budget.signal_passes == 3 * 90
    assert sorted(run.signals["epoch"].unique()) == [0, 2, 4] and len(run.signals) == 3 * 90
    assert len(run.selections) == 3 and all(len(s.indices) == 27 for s in run.selections)
    assert len({tuple(s.indices) for s in run.selections}) == 3  # a fresh subset at each reselection


def test_full_data_policy_trains_exactly_like_the_plain_trainer():
    X, y = _pool()
    plain = _model()
    train(plain, X, y, loss_fn=F.cross_entropy, epochs=4, batch_size=16, lr=1e-2, seed=5)
    run = sel.train_with_selection(_model(), X, y, sel.full_data(), epochs=4, reselect_every=1, batch_size=16, lr=1e-2, seed=5)
    for a, b in zip(plain.parameters(), run.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert run.budget.samples_seen == 4 * 90


def test_zero_weights_leave_the_model_unchanged_and_unit_weights_do_not():
    X, y = _pool()

    def weighted(value):
        return lambda state: sel.Selection(np.arange(state.n), weights=np.full(state.n, value))

    before = [p.detach().clone() for p in _model().parameters()]
    frozen = sel.train_with_selection(_model(), X, y, weighted(0.0), epochs=2, reselect_every=1, batch_size=16, lr=1e-2, seed=0)
    moved = sel.train_with_selection(_model(), X, y, weighted(1.0), epochs=2, reselect_every=1, batch_size=16, lr=1e-2, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.model.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(before, moved.model.parameters()))


def test_only_the_rows_a_selection_marks_are_augmented():
    X, y = _pool()
    X = X.clone()
    X[:, 5] = torch.arange(len(X), dtype=torch.float32)  # a column naming each row
    seen: list[int] = []

    def record(batch, rng):
        seen.extend(batch[:, 5].long().tolist())
        return batch

    chosen = np.arange(0, 90, 3)
    marks = np.arange(len(chosen)) % 2 == 0
    policy = sel.fixed_subset(chosen)
    marked_policy = lambda state: sel.Selection(policy(state).indices, augment=marks)
    sel.train_with_selection(_model(), X, y, marked_policy, epochs=2, reselect_every=1, batch_size=7, lr=1e-2, seed=0,
                             augment=record)
    assert sorted(seen) == sorted(np.repeat(chosen[marks], 2).tolist())


def test_embed_adds_a_density_column_from_the_features():
    X, y = _pool()
    run = sel.train_with_selection(_model(), X, y, sel.full_data(), epochs=1, reselect_every=1, batch_size=16, lr=1e-2,
                                   seed=0, embed=lambda m, x: m[:-1](x), density_k=5)
    feats = _model()[:-1](X).detach().numpy()
    np.testing.assert_allclose(run.signals["density"], sel.knn_density(feats, 5), rtol=1e-6)


def test_selection_rejects_repeated_rows_and_misshapen_weights():
    with pytest.raises(ValueError, match="distinct"):
        sel.Selection(np.array([1, 1, 2]))
    with pytest.raises(ValueError, match="weights"):
        sel.Selection(np.array([1, 2]), weights=np.ones(3))


def test_label_ledger_counts_exactly_and_refuses_double_or_excess_purchases():
    ledger = sel.LabelLedger(10, limit=5)
    ledger.buy([3, 1])
    ledger.buy(np.array([7]))
    assert ledger.count == 3 and ledger.bought.tolist() == [1, 3, 7]
    with pytest.raises(ValueError, match="only once"):
        ledger.buy([3])
    with pytest.raises(ValueError, match="only once"):
        ledger.buy([4, 4])
    with pytest.raises(ValueError, match="exceed"):
        ledger.buy([0, 2, 4])
    with pytest.raises(ValueError, match="rows must lie"):
        ledger.buy([10])
    assert ledger.count == 3  # refused purchases cost nothing


def test_label_noise_flips_exactly_the_promised_count_to_other_classes_uniformly():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 2500)
    noisy, flipped = dd.with_label_noise(y, 0.2, 4, rng)
    assert flipped.sum() == 2000 and np.all(noisy[flipped] != y[flipped]) and np.all(noisy[~flipped] == y[~flipped])
    offsets = np.bincount((noisy[flipped] - y[flipped]) % 4, minlength=4)
    assert offsets[0] == 0 and np.all(np.abs(offsets[1:] / 2000 - 1 / 3) < 0.04)


def test_class_imbalance_sizes_decay_geometrically_to_the_ratio():
    X, y = dd.bundled_table("digits")
    Xi, yi = dd.with_class_imbalance(X, y, 10.0, np.random.default_rng(0))
    sizes = np.bincount(yi)
    m = np.bincount(y).min()
    np.testing.assert_array_equal(sizes, [round(m * 10 ** (-c / 9)) for c in range(10)])
    assert len(Xi) == len(yi) and sizes[0] / sizes[-1] == pytest.approx(10, rel=0.1)


def test_redundancy_appends_jittered_copies_with_their_source_rows():
    X, y = dd.bundled_table("wine")
    Xr, yr, source = dd.with_redundancy(X, y, 2, 0.01, np.random.default_rng(0))
    assert Xr.shape == (3 * len(X), X.shape[1]) and np.all(yr == y[source])
    assert (Xr[len(X):] - X[source[len(X):]]).std() == pytest.approx(0.01, rel=0.05)
    np.testing.assert_array_equal(Xr[:len(X)], X)


def test_bundled_tables_are_standardised():
    for name in dd.TABLES:
        X, y = dd.bundled_table(name)
        assert len(X) == len(y) and np.all(np.abs(X.mean(axis=0)) < 1e-9)
        assert np.all((np.abs(X.std(axis=0) - 1) < 1e-9) | (X.std(axis=0) == 0))
    with pytest.raises(ValueError, match="unknown table"):
        dd.bundled_table("mnist")
