"""info_coevolution: the selection machinery against independent references (smoke run, determinism and params
come from test_papers.py).

The references are scalar transcriptions of the official code's rules (``confidence_convergence``, ``knn_classifier``,
the notebook's rechecking loop) and brute-force cosine distances with NumPy."""

import math
from collections import defaultdict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for

from flows.info_coevolution import method as M
from paperflows.core.seeding import torch_seeded
from tasks.selection import LabelLedger
from tasks.train import mlp, torch_single_thread, train


@pytest.fixture(autouse=True)
def single_thread():
    with torch_single_thread():   # as inside the flow's tasks; many threads only thrash on a small model
        yield


# ------------------------------------------------------------------------------------- scalar references
def official_fusion(p1, c1, p2, c2):
    """The official ``confidence_convergence(pred1, pred2, conf_decay=True)``, line by line."""
    if p1 == p2:
        x, y = max(c1, c2), min(c1, c2)
        return p1, (x * y / (x * y + (1 - x) * (1 - y)) if y > 0.5 else x)
    p = [p1, p2][int(np.argmax([c1, c2]))]
    x, y = max(c1, c2), min(c1, c2)
    return p, (x * (1 - y) / (x * (1 - y) + (1 - x) * y) if y > 0.5 else x)


def brute_knn(emb, i, k):
    """k nearest other points of row i by cosine distance, computed directly: (indices, distances)."""
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    d = 1.0 - unit @ unit[i]
    d[i] = np.inf
    order = np.argsort(d, kind="stable")[:k]
    return order, d[order]


def official_knn_pred(emb, i, label, conf, k, max_d):
    """``knn_pred`` + ``knn_classifier``: dict vote of conf * similarity within max_d; (None/0, 0) without votes."""
    nb, d = brute_knn(emb, i, k)
    keep = d <= max_d
    votes = defaultdict(float)
    for j, dist in zip(nb[keep], d[keep]):
        votes[int(label[j])] += conf[j] * (1 - dist)
    total = sum(votes.values())
    if not votes or total == 0:
        return 0, 0.0
    best = max(votes, key=votes.get)
    return best, votes[best] / total


def toy_index(seed=0, n=40, dim=5, n_classes=3, noise=0.6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 2
    y = rng.integers(n_classes, size=n)
    emb = centres[y] + noise * rng.normal(size=(n, dim))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    label = np.where(rng.random(n) < 0.8, y, rng.integers(n_classes, size=n))
    conf = rng.uniform(0.2, 0.999, size=n)
    return emb, y, label, conf


# ------------------------------------------------------------------------------------- fusion
def test_fusion_closed_form_cases():
    p, c = M.fuse(np.array([1, 1, 1, 2, 4]), np.array([0.8, 0.8, 0.4, 0.7, 0.0]),
                  np.array([1, 2, 2, 2, 3]), np.array([0.7, 0.7, 0.9, 0.7, 0.6]))
    # agree: 0.8*0.7 / (0.56 + 0.2*0.3); disagree: 0.8*0.3 / (0.24 + 0.2*0.7); one <= 0.5: the max stands
    assert c[0] == pytest.approx(0.56 / 0.62) and p[0] == 1
    assert c[1] == pytest.approx(0.24 / 0.38) and p[1] == 1
    assert c[2] == pytest.approx(0.9) and p[2] == 2
    assert c[3] == pytest.approx(0.49 / 0.58) and p[3] == 2
    assert c[4] == pytest.approx(0.6) and p[4] == 3      # no kNN vote (0, 0): the model's prediction stands
    # two contradicting certainties: the official code divides by zero; here 0.5
    assert M.fuse(np.array([0]), np.array([1.0]), np.array([1]), np.array([1.0]))[1][0] == 0.5


def test_fusion_matches_the_official_scalar_rule_on_random_inputs():
    rng = np.random.default_rng(1)
    n = 500
    p1, p2 = rng.integers(3, size=n), rng.integers(3, size=n)
    c1, c2 = rng.random(n), rng.random(n)
    c1[:20] = c2[:20]                       # ties of a disagreement go to the first prediction
    p, c = M.fuse(p1, c1, p2, c2)
    for i in range(n):
        rp, rc = official_fusion(p1[i], c1[i], p2[i], c2[i])
        assert p[i] == rp and c[i] == pytest.approx(rc, abs=1e-12)


# ------------------------------------------------------------------------------------- kNN and gains
def test_neighbour_graph_is_exact_cosine_knn_without_self():
    emb, *_ = toy_index()
    graph = M.neighbour_graph(emb, 6)
    for i in range(len(emb)):
        nb, d = brute_knn(emb, i, 6)
        assert i not in graph.idx[i]
        np.testing.assert_allclose(graph.dist[i], d, atol=1e-9)
        assert set(graph.idx[i]) == set(nb)


def test_knn_vote_matches_the_official_dict_vote():
    emb, _, label, conf = toy_index()
    graph = M.neighbour_graph(emb, 8)
    rows = np.arange(len(emb))
    for max_d in (0.05, 0.15, 0.5, 2.0):   # from mostly no votes to every neighbour voting
        pred, c = M.knn_vote(rows, graph, label, conf, 3, 8, max_d)
        for i in rows:
            rp, rc = official_knn_pred(emb, i, label, conf, 8, max_d)
            assert c[i] == pytest.approx(rc, abs=1e-9)
            if rc > 0:
                assert pred[i] == rp


def test_gains_are_one_minus_fused_confidence_except_annotated_and_certain_points():
    p = params_for("info_coevolution", knn_k=8, knn_max_distance=0.3)
    emb, y, label, conf = toy_index()
    conf[3] = 1.0                                   # a certain model prediction: no gain
    annotated = np.zeros(len(y), bool)
    annotated[[0, 1, 2]] = True
    index = M.Index.build(M.View(emb, label, conf, conf), annotated, np.where(annotated, y, -1),
                          M.neighbour_graph(emb, 8), 3)
    assert index.label[0] == y[0] and index.conf[0] == 1.0
    gain = index.gains(p)
    for i in range(len(y)):
        if i <= 3:
            assert gain[i] == 0
            continue
        kp, kc = official_knn_pred(emb, i, index.label, index.conf, 8, 0.3)
        _, c = official_fusion(kp, kc, index.label[i], index.conf[i])
        assert gain[i] == pytest.approx(max(0.0, 1.0 - c))


# ------------------------------------------------------------------------------------- rechecking and selection
def official_recheck(p, emb, label, conf, annotated, gain, i, y_true):
    """The notebook's annotate-and-recheck loop for one point, on brute-force neighbours (reference)."""
    label, conf, annotated, gain = label.copy(), conf.copy(), annotated.copy(), gain.copy()
    label[i], conf[i], annotated[i], gain[i] = y_true, 1.0, True, 0.0
    nb, d = brute_knn(emb, i, p.recheck_k)
    for j, dist in zip(nb[d <= p.recheck_max_distance], d[d <= p.recheck_max_distance]):
        if annotated[j] or not 1 - dist > p.recheck_min_similarity:
            continue
        kp, kc = official_knn_pred(emb, j, label, conf, p.knn_k, p.knn_max_distance)
        _, c = official_fusion(kp, kc, label[j], conf[j])
        gain[j] = max(0.0, 1 - c) if label[j] == y_true else max(gain[j], 1 - c)
    return gain


def test_rechecking_follows_the_notebook_rule():
    p = params_for("info_coevolution", knn_k=8, knn_max_distance=0.3, recheck_k=6, recheck_max_distance=0.3,
                   recheck_min_similarity=0.75)
    emb, y, label, conf = toy_index(seed=3, n=60, noise=0.35)
    annotated = np.zeros(len(y), bool)
    annotated[:5] = True
    index = M.Index.build(M.View(emb, label, conf, conf), annotated, np.where(annotated, y, -1),
                          M.neighbour_graph(emb, 8), 3)
    gain = index.gains(p)
    changed = 0
    for i in (10, 20, 30, 40):
        before = gain.copy()
        expected = official_recheck(p, emb, index.label, index.conf, index.annotated, gain, i, int(y[i]))
        index.annotate(p, i, int(y[i]), gain)
        np.testing.assert_allclose(gain, expected, atol=1e-12)
        others = np.arange(len(y)) != i
        changed += int(np.sum(np.abs(gain - before)[others] > 1e-12))
    assert changed > 0, "the instance must exercise rechecking"


def test_selection_draws_only_positive_gains_and_stops_on_the_criterion():
    p = params_for("info_coevolution", knn_k=8, recheck_k=1, recheck_max_distance=1e-9, stop_criterion=0.0)
    emb, y, label, conf = toy_index(seed=5, n=30)
    annotated = np.zeros(30, bool)
    rng = np.random.default_rng(0)
    counts = np.zeros(30)
    for _ in range(300):   # one draw of one label from gains 0 except rows 3 (weight 1) and 7 (weight 3)
        index = M.Index.build(M.View(emb, label, conf, conf), annotated, y, M.neighbour_graph(emb, 8), 3)
        gain = np.zeros(30)
        gain[3], gain[7] = 0.1, 0.3
        ledger = LabelLedger(30)
        assert M.select_round(p, index, gain, y, ledger, quota=1, draw=1, rng=rng) == 1
        counts[ledger.bought] += 1
    assert counts.sum() == 300 and counts[3] + counts[7] == 300
    assert abs(counts[7] / 300 - 0.75) < 4 * math.sqrt(0.75 * 0.25 / 300)
    # total gain at the criterion: nothing is bought
    index = M.Index.build(M.View(emb, label, conf, conf), annotated, y, M.neighbour_graph(emb, 8), 3)
    p1 = params_for("info_coevolution", stop_criterion=1.0)
    gain = np.full(30, 1.0 / 30)
    assert M.select_round(p1, index, gain, y, LabelLedger(30), quota=10, draw=5, rng=rng) == 0
    # plenty of gain: the quota is bought exactly, in draws, each label once
    gain = np.ones(30)
    ledger = LabelLedger(30)
    assert M.select_round(p1, index, gain, y, ledger, quota=13, draw=5, rng=rng) == 13
    assert ledger.count == 13 == int(index.annotated.sum()) and np.all(gain[ledger.bought] == 0)


# ------------------------------------------------------------------------------------- whole methods
@pytest.fixture(scope="module")
def tiny():
    p = params_for("info_coevolution", epochs=5, min_steps=30, round_fraction=0.2, draw_fraction=0.1)
    data = M.load_data(p, "digits", 0)
    keep = np.random.default_rng(0).choice(len(data.y_pool), 300, replace=False)
    data = M.Data(data.X_pool[keep], data.y_pool[keep], data.X_test, data.y_test, 10)
    return p, data


def test_at_full_annotation_every_method_equals_full_annotation(tiny):
    p, data = tiny
    n = len(data.y_pool)
    initial = M.initial_set(p, n, 0, "digits")
    full = M.accuracy(M.fit(p, data.X_pool, data.y_pool, 10, 7), data.X_test, data.y_test)
    order = M.random_order(n, initial, np.random.default_rng(0))
    assert sorted(order) == list(range(n)) and set(order[:len(initial)]) == set(initial)
    (rand,), lc = M.baselines(p, data, [order], initial, [len(initial), n], 7)
    assert rand[-1] == lc[-1] == (n, full)


def test_a_batched_fit_is_bitwise_the_single_fits(tiny):
    p, data = tiny
    rows = np.stack([np.sort(np.random.default_rng(s).choice(len(data.y_pool), 50, replace=False)) for s in range(3)])
    batched = M.fit_batch(p, data.X_pool[rows], data.y_pool[rows], 10, 7)
    for r, model in zip(rows, batched):
        alone = M.fit(p, data.X_pool[r], data.y_pool[r], 10, 7)
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), alone.state_dict().values()))
    # and a single fit is bitwise the shared training loop's
    with torch_seeded(7):
        reference = mlp(data.X_pool.shape[1], list(p.hidden), 10)
    epochs = max(p.epochs, math.ceil(p.min_steps / math.ceil(50 / p.batch_size)))
    train(reference, torch.from_numpy(data.X_pool[rows[0]]), torch.from_numpy(data.y_pool[rows[0]]),
          loss_fn=F.cross_entropy, epochs=epochs, batch_size=p.batch_size, lr=p.lr, seed=7)
    assert all(torch.equal(a, b) for a, b in zip(reference.state_dict().values(), batched[0].state_dict().values()))


def test_least_confidence_buys_the_least_confident_points(tiny):
    p, data = tiny
    n = len(data.y_pool)
    initial = M.initial_set(p, n, 0, "digits")
    m = len(initial) + 17
    _, curve = M.baselines(p, data, [], initial, [len(initial), m], 7)
    assert [c for c, _ in curve] == [len(initial), m]
    # independent: fit on the initial set, rank the others by max-softmax, refit on initial + 17 lowest
    model = M.fit(p, data.X_pool[np.sort(initial)], data.y_pool[np.sort(initial)], 10, 7)
    pmax = M.model_view(model, data.X_pool, 10).p_max
    rest = np.setdiff1d(np.arange(n), initial)
    rows = np.sort(np.concatenate([initial, rest[np.argsort(pmax[rest], kind="stable")[:17]]]))
    assert curve[-1][1] == M.accuracy(M.fit(p, data.X_pool[rows], data.y_pool[rows], 10, 7), data.X_test, data.y_test)


def test_info_coevolution_accounts_labels_and_respects_its_cap(tiny):
    p, data = tiny
    n = len(data.y_pool)
    initial = M.initial_set(p, n, 0, "digits")
    out = M.info_coevolution(p, data, initial, data.y_pool, 7, np.random.default_rng(0), pseudo=True, cap_ratio=0.5)
    assert out["labels"] <= n // 2 and out["labels"] >= len(initial)
    counts = [c for c, _ in out["curve"]]
    assert counts[0] == len(initial) and counts == sorted(counts) and counts[-1] == out["labels"]
    assert out["stop"] in ("auto-stop", "cap")
    if out["stop"] == "auto-stop":
        assert out["final_total_gain"] <= p.stop_criterion


def test_auto_stop_fires_on_a_redundant_pool_and_not_on_noise():
    """Ten tight clusters of near-duplicates: after the initial labels every point is certain and the stop fires at
    once; with permuted labels nothing is learnable and the loop keeps buying."""
    p = params_for("info_coevolution", epochs=30, min_steps=200, round_fraction=0.2, draw_fraction=0.1)
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(10, 8)).astype(np.float32) * 3
    y = np.repeat(np.arange(10), 30)
    X = (centres[y] + 0.01 * rng.normal(size=(300, 8))).astype(np.float32)
    data = M.Data(X, y, X[:50], y[:50], 10)
    initial = np.sort(np.concatenate([np.flatnonzero(y == k)[:3] for k in range(10)]))
    out = M.info_coevolution(p, data, initial, y, 0, np.random.default_rng(0))
    assert out["stop"] == "auto-stop" and out["labels"] == len(initial)
    noise = M.info_coevolution(p, data, initial, rng.permutation(y), 0, np.random.default_rng(0), cap_ratio=0.5)
    assert noise["labels"] > 2 * len(initial)


def test_labels_to_reach():
    curve = [(10, 0.5), (20, 0.8), (30, 0.79), (40, 0.9)]
    assert M.labels_to_reach(curve, 0.8, 100) == (20, False)
    assert M.labels_to_reach(curve, 0.85, 100) == (40, False)
    assert M.labels_to_reach(curve, 0.95, 100) == (100, True)


def test_auto_stop_saving_counts_only_lossless_seeds():
    """The paper's 32% is 'without performance loss': a seed more than the tolerance below full annotation is
    charged the whole pool, and the threshold is the paper's 0.68."""
    import pandas as pd
    from flows.info_coevolution.claims import PAPER
    from flows.info_coevolution.evaluate import _dataset_metrics

    claim = next(c for c in PAPER.claims if c.id == "auto_stop_saves_annotation")
    assert claim.threshold == 0.68
    n = 4
    rows = pd.DataFrame({"seed": range(n), "pool": 100, "initial": 10, "acc_full": 0.9,
                         "ic_acc": [0.9, 0.9, 0.8, 0.9], "ic_ratio": 0.5, "perm_ratio": 1.0,
                         "random_acc_same": [0.85] * n, "ic_stop": "auto-stop", "perm_stop": "budget"})
    cols = ["ic_model_updates", "random2_acc_same", "lc_acc_same", "ssl_acc", "random_ssl_acc_same", "ssl_ratio",
            "ssl_n_pseudo", "ssl_pseudo_accuracy"] + [f"{k}_to_target" for k in ("ic", "random", "random2", "lc")]
    for c in cols:
        rows[c] = 1.0
    rows["ic_censored"] = 0.0
    rows["ssl_stop"] = "auto-stop"
    m = _dataset_metrics(rows, 0.005)
    assert m["ic_lossless_ratio"]["mean"] == pytest.approx((0.5 * 3 + 1.0) / 4)
    assert m["random_lossless_ratio"]["mean"] == pytest.approx(1.0)
