"""CoDy's method against independent references: the stream's planted motifs against its parameters, the masked
model against the model on a stream with the events deleted, the candidate set against a loop over its definition,
the searches against brute force on tiny instances, AUFSC+ against a numerical integral (no Prefect engine)."""

import itertools

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.cody import method as M
from paperflows.core.seeding import numpy_rng
from tasks.gnn import recent_events


@pytest.fixture(scope="module")
def trained():
    p = params_for("cody", n_events=600, epochs=1, candidates=12, budget=30)
    torch.set_num_threads(1)
    s = M.make_stream(p, numpy_rng(0, 0))
    model, _ = M.train_model(p, s, 0)
    return p, s, model


# ------------------------------------------------------------------------------------------------ the stream
def test_stream_plants_the_motifs_at_their_rates():
    p = params_for("cody", n_events=20000, n_users=100, n_items=60, n_groups=6, p_repeat=0.3, p_cooc=0.5, motif_memory=3)
    s = M.make_stream(p, numpy_rng(1, 0))
    caused = np.flatnonzero(s.cause >= 0)
    # every cause is one of the same user's last motif_memory events before it
    for e in caused[:2000]:
        own = np.flatnonzero(s.user[:e] == s.user[e])[-p.motif_memory:]
        assert s.cause[e] in own
    items = s.item - p.n_users
    same_item = items[caused] == items[s.cause[caused]]
    same_group = s.item_group[items[caused]] == s.item_group[items[s.cause[caused]]]
    assert same_group.all()
    # share with a cause = p_repeat + p_cooc (users with no history yet are few); repeats: p_repeat plus the
    # co-occurrence draws that land on the same item (1 in items per group)
    assert abs(len(caused) / len(s.t) - 0.8) < 0.02
    per_group = p.n_items / p.n_groups
    assert abs(same_item.mean() - (0.3 + 0.5 / per_group) / 0.8) < 0.02
    assert np.all(np.diff(s.t) > 0) and s.node_features[: p.n_users].sum() == 0


def test_candidates_match_a_loop_over_the_definition():
    p = params_for("cody", n_events=400)
    s = M.make_stream(p, numpy_rng(2, 0))
    for event in (150, 260, 399):
        ids, dist = M.candidate_events(s, event, 20)
        u, i = s.user[event], s.item[event]
        reached = {u, i}
        for e in range(event):
            if s.user[e] == u or s.item[e] == i:
                reached |= {s.user[e], s.item[e]}
        expected = [e for e in range(event) if s.user[e] in reached and s.item[e] in reached][-20:]
        assert ids.tolist() == expected
        assert dist.tolist() == [0 if (s.user[e] == u or s.item[e] == i) else 1 for e in expected]


# ------------------------------------------------------------------------------------------- the masked model
def test_masked_windows_and_predictions_equal_the_model_on_the_stream_without_those_events(trained):
    p, s, model = trained
    rng = np.random.default_rng(0)
    for event in (450, 520, 599):
        inst = M.Instance(model, s, event, p)
        masks = rng.random((5, inst.n)) < 0.4
        masks[0] = False
        got = inst.predict(masks)
        assert inst.calls == 5
        for row, mask in enumerate(masks):
            keep = np.ones(event, dtype=bool)
            keep[inst.candidates[mask]] = False
            # reference: tasks.gnn.recent_events on the stream with the removed events deleted
            src, dst, t = s.user[:event][keep], s.item[:event][keep], s.t[:event][keep]
            ref = []
            for node in (s.user[event], s.item[event]):
                nb, ev, valid = recent_events(src, dst, t, np.array([node]), np.array([s.t[event]]), p.neighbours)
                ref.append(M.Windows(np.array([node]), nb, np.where(valid, s.t[event] - t[ev], 0.0), valid))
            mine = inst.windows(mask[None])
            for a, b in zip(mine, ref):
                assert np.array_equal(a.valid, b.valid)
                assert np.array_equal(np.where(a.valid, a.neighbour, -1), np.where(b.valid, b.neighbour, -1))
                assert np.allclose(a.delta_t, b.delta_t)
            with torch.no_grad():
                assert got[row] == pytest.approx(float(model(*ref)[0]), abs=1e-5)
        assert got[0] == pytest.approx(inst.original, abs=1e-6)


def test_gradient_ranking_matches_finite_differences(trained):
    p, s, model = trained
    inst = M.Instance(model, s, 580, p)
    importance = M.factual_ranking(inst, "gradient")
    wu, wi = inst.windows(np.zeros((1, inst.n), dtype=bool))
    slots_u, slots_i = inst.slot_candidates()
    eps = 1e-2
    expected = np.zeros(inst.n)
    for side, slots in ((0, slots_u), (1, slots_i)):
        for k in np.flatnonzero(slots >= 0):
            hi, lo = [torch.ones(1, inst.k), torch.ones(1, inst.k)], [torch.ones(1, inst.k), torch.ones(1, inst.k)]
            hi[side][0, k] += eps
            lo[side][0, k] -= eps
            with torch.no_grad():
                diff = (model(wu, wi, *hi) - model(wu, wi, *lo)).item() / (2 * eps)
            expected[slots[k]] += np.sign(inst.original) * diff
    assert np.abs(expected).max() > 1e-3  # the check has something to compare
    assert np.allclose(importance, expected, atol=1e-3 + 1e-2 * np.abs(expected).max())


# ------------------------------------------------------------------------------------------ the searches
class Additive:
    """A stand-in model: logit = 1 - sum of the removed events' weights + pairwise terms; calls counted."""

    def __init__(self, n: int, rng: np.random.Generator, pair: float = 0.0) -> None:
        self.n, self.original, self.calls = n, 1.0, 0
        self.distance = rng.integers(0, 2, n)
        self.w = rng.uniform(0, 0.6, n)
        self.pair = pair * rng.standard_normal((n, n))

    def predict(self, masks: np.ndarray) -> np.ndarray:
        masks = np.atleast_2d(masks).astype(float)
        self.calls += len(masks)
        return 1.0 - masks @ self.w - np.einsum("bi,ij,bj->b", masks, self.pair, masks)

    def flips(self, subset) -> bool:
        mask = np.zeros(self.n, dtype=bool)
        mask[list(subset)] = True
        calls = self.calls
        out = self.predict(mask[None])[0] < 0
        self.calls = calls
        return bool(out)


def brute_force_min_size(inst: Additive) -> int | None:
    for size in range(1, inst.n + 1):
        if any(inst.flips(c) for c in itertools.combinations(range(inst.n), size)):
            return size
    return None


@pytest.mark.parametrize("policy", M.POLICIES)
def test_cody_with_an_unbinding_budget_finds_a_minimum_counterfactual(policy):
    p = params_for("cody", budget=10_000)
    for trial in range(6):
        inst = Additive(7, np.random.default_rng(trial), pair=0.15)
        best = brute_force_min_size(inst)
        out = M.cody(inst, policy, p, np.random.default_rng(trial))
        if best is None:
            assert not out.counterfactual
        else:
            assert out.counterfactual and inst.flips(out.removed)
            assert len(out.removed) == best, (policy, trial, out.removed)


def test_greedy_on_an_additive_model_removes_the_heaviest_events():
    p = params_for("cody", budget=10_000, greedy_sample=8)
    for trial in range(5):
        inst = Additive(8, np.random.default_rng(10 + trial))
        out = M.greedy(inst, "spatiotemporal", p, np.random.default_rng(0))
        order = np.argsort(-inst.w)
        k = int(np.searchsorted(np.cumsum(inst.w[order]), 1.0, side="right")) + 1
        if k <= inst.n:
            assert out.counterfactual and sorted(out.removed) == sorted(order[:k].tolist())
        else:
            assert not out.counterfactual


@pytest.mark.parametrize("name", M.EXPLAINERS)
def test_no_explainer_exceeds_the_budget_and_counterfactuals_flip(name, trained):
    p, s, model = trained
    for event in (480, 560, 599):
        inst = M.Instance(model, s, event, p)
        inst.calls = 0
        out = M.explain(inst, name, p, np.random.default_rng(event))
        assert out.calls == inst.calls <= p.budget
        if out.counterfactual:
            mask = np.zeros((1, inst.n), dtype=bool)
            mask[0, out.removed] = True
            assert inst.predict(mask)[0] * inst.original < 0


def test_policies_rank_as_documented():
    inst = Additive(6, np.random.default_rng(0))
    inst.distance = np.array([1, 0, 1, 0, 0, 1])
    rng = np.random.default_rng(0)
    assert M.rank("temporal", inst, {5}, rng, None) == [4, 3, 2, 1, 0]
    assert M.rank("spatiotemporal", inst, set(), rng, None) == [4, 3, 1, 5, 2, 0]
    assert M.rank("event_impact", inst, {0}, rng, np.array([0.9, 0.1, 0.5, 0.5, 0.0, 0.3])) == [3, 2, 5, 1, 4]
    assert sorted(M.rank("random", inst, {1}, rng, None)) == [0, 2, 3, 4, 5]


def test_prediction_delta_official_cases():
    assert M.prediction_delta(2.0, 0.5) == 1.5
    assert M.prediction_delta(2.0, -0.5) == 2.5
    assert M.prediction_delta(-1.0, -3.0) == -2.0


# ------------------------------------------------------------------------------------------------ the metric
def test_aufsc_is_the_integral_of_the_fidelity_curve():
    rng = np.random.default_rng(0)
    cf = rng.random(50) < 0.6
    sparsity = np.where(cf, rng.integers(1, 65, 50) / 64, 1.0)
    levels = np.linspace(0, 1, 200_001)
    numeric = np.trapezoid(M.fidelity_curve(cf, sparsity, levels), levels)
    assert M.aufsc(cf, sparsity) == pytest.approx(numeric, abs=1e-4)
    assert M.aufsc(np.zeros(5, bool), np.ones(5)) == 0.0
