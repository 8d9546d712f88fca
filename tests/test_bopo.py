"""bopo: the method against independent references (smoke run, determinism and params come from test_papers.py)."""

import itertools
import math

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.bopo import method as M


def brute_force_tsp(coords: np.ndarray) -> float:
    n = len(coords)
    best = math.inf
    for perm in itertools.permutations(range(1, n)):
        tour = (0, *perm)
        best = min(best, sum(np.linalg.norm(coords[tour[i]] - coords[tour[(i + 1) % n]]) for i in range(n)))
    return best


@pytest.mark.parametrize("n", [4, 6, 7])
def test_held_karp_equals_brute_force(n):
    coords = M.instances(5, 6, n)
    expected = [brute_force_tsp(c) for c in coords]
    np.testing.assert_allclose(M.held_karp(coords), expected, rtol=0, atol=1e-12)


def test_tour_length_of_the_unit_square_and_its_crossing_tour():
    square = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
    tours = torch.tensor([[[0, 1, 2, 3], [0, 2, 1, 3]]])
    np.testing.assert_allclose(M.tour_lengths(square, tours).numpy(), [[4.0, 2 + 2 * math.sqrt(2)]], rtol=1e-6)


def test_uniform_filter_keeps_evenly_spaced_ranks_including_the_best():
    lengths = torch.tensor([[5.0, 1.0, 7.0, 3.0, 8.0, 2.0, 6.0, 4.0]])  # rank r has length r + 1 at these positions
    keep = M.uniform_filter(lengths, 4)
    np.testing.assert_array_equal(lengths[0, keep[0]].numpy(), [1.0, 3.0, 5.0, 7.0])  # ranks 0, 2, 4, 6


def test_preference_pairs_best_anchored_and_all():
    w, l = M.preference_pairs(5, "best")
    assert w.tolist() == [0, 0, 0, 0] and l.tolist() == [1, 2, 3, 4]
    w, l = M.preference_pairs(5, "all")
    assert sorted(zip(w.tolist(), l.tolist())) == list(itertools.combinations(range(5), 2))


def test_bopo_loss_matches_the_closed_form_and_its_gradient():
    mean_logp = torch.tensor([[-0.5, -0.9, -0.2]], requires_grad=True)
    lengths = torch.tensor([[2.0, 3.0, 2.5]])
    w, l = M.preference_pairs(3, "best")
    loss = M.bopo_loss(mean_logp, lengths, w, l)
    sig = lambda x: 1 / (1 + math.exp(-x))
    b1, m1 = 3.0 / 2.0, -0.5 + 0.9
    b2, m2 = 2.5 / 2.0, -0.5 + 0.2
    expected = -(math.log(sig(b1 * m1)) + math.log(sig(b2 * m2))) / 2
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-6)
    loss.backward()
    # d/dm of -log sig(b m) is -b sig(-b m): the objective ratio scales the gradient of each pair
    g1, g2 = -b1 * sig(-b1 * m1) / 2, -b2 * sig(-b2 * m2) / 2
    np.testing.assert_allclose(mean_logp.grad.numpy(), [[g1 + g2, -g1, -g2]], rtol=1e-5)
    flat = M.bopo_loss(mean_logp.detach(), lengths, w, l, objective_guided=False)
    assert float(flat) == pytest.approx(-(math.log(sig(m1)) + math.log(sig(m2))) / 2, rel=1e-6)


def small_policy(seed=0):
    p = params_for("bopo", d_model=16, heads=2, layers=1)
    return M.new_policy(p, seed)


def test_policy_is_a_distribution_over_all_tours_and_forcing_reproduces_sampling():
    torch.manual_seed(0)
    model = small_policy()
    coords = torch.rand(2, 5, 2)
    tours = torch.tensor([(0, *q) for q in itertools.permutations(range(1, 5))])  # all 24 tours from node 0
    actions = tours[None].expand(2, -1, -1)
    with torch.no_grad():
        _, logp = model.rollout(coords, len(tours), "force", actions=actions)
        np.testing.assert_allclose(logp.sum(-1).exp().sum(-1).numpy(), [1.0, 1.0], rtol=1e-5)
        sampled, logp_s = model.rollout(coords, 7, "sample", torch.Generator().manual_seed(1))
        assert all(sorted(t.tolist()) == list(range(5)) and t[0] == 0 for t in sampled.reshape(-1, 5))
        _, logp_f = model.rollout(coords, 7, "force", actions=sampled)
        np.testing.assert_allclose(logp_f.numpy(), logp_s.numpy(), atol=1e-6)


def test_gumbel_sampling_matches_the_policy_probabilities():
    model = small_policy(3)
    coords = torch.rand(1, 4, 2, generator=torch.Generator().manual_seed(2))
    tours = torch.tensor([(0, *q) for q in itertools.permutations(range(1, 4))])
    with torch.no_grad():
        _, logp = model.rollout(coords, len(tours), "force", actions=tours[None])
        probs = logp.sum(-1).exp()[0].numpy()
        sampled, _ = model.rollout(coords, 20000, "sample", torch.Generator().manual_seed(4))
    index = {tuple(t.tolist()): i for i, t in enumerate(tours)}
    freq = np.bincount([index[tuple(t)] for t in sampled[0].tolist()], minlength=len(tours)) / 20000
    np.testing.assert_allclose(freq, probs, atol=4 * np.sqrt(0.25 / 20000))


def test_greedy_picks_the_most_likely_next_node_each_step():
    model = small_policy(1)
    coords = torch.rand(3, 6, 2, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        greedy, logp_g = model.rollout(coords, 1, "greedy")
        # any single-step deviation from the greedy prefix has a smaller first-step probability
        sampled, logp_s = model.rollout(coords, 200, "sample", torch.Generator().manual_seed(6))
    same_first = sampled[:, :, 1] == greedy[:, :, 1]
    assert (logp_s[:, :, 0][~same_first] <= logp_g[:, :, 0].expand_as(same_first)[~same_first] + 1e-6).all()


@pytest.mark.parametrize("name", ["bopo", "reinforce", "slim"])
def test_short_training_beats_the_untrained_policy(name):
    p = params_for("bopo", n_nodes=8, steps=40, batch=16, samples=16, keep=4, d_model=32, heads=4, layers=1, lr=3e-3)
    coords = M.instances(11, 100, 8)
    X, opt = torch.as_tensor(coords, dtype=torch.float32), torch.as_tensor(M.held_karp(coords), dtype=torch.float32)
    model = M.new_policy(p, 0)
    # the sampled policy is what the training signal acts on; 40 steps may not yet move the greedy tour
    before = M.evaluate(model, X, opt, p, 0)["gap_sample"]
    with torch.random.fork_rng():
        torch.set_num_threads(1)
        M.train(model, name, p, 0)
    after = M.evaluate(model, X, opt, p, 0)["gap_sample"]
    assert after < 0.9 * before


def test_run_seed_shares_initial_weights_and_is_deterministic():
    p = params_for("bopo")
    coords, optimum = M.test_set(p)
    a = M.run_seed(p, 0, coords, optimum)
    b = M.run_seed(p, 0, coords, optimum)
    strip = lambda rows: [{k: (None if v != v else v) for k, v in r.items() if k != "train_s"} for r in rows]
    assert strip(a) == strip(b)
    assert [r["method"] for r in a] == ["untrained", *p.methods]
    assert all(r["gap_greedy"] >= -1e-6 and r["gap_sample"] >= -1e-6 for r in a)  # no tour beats the optimum


def test_params_require_every_method_in_a_claim():
    # the ablation claims read bopo_beta1 and bopo_allpairs: a run without one could not check its claim
    with pytest.raises(ValueError, match="at least 5"):
        params_for("bopo", methods=["bopo", "reinforce", "slim", "bopo_beta1"])
    assert set(params_for("bopo").methods) == set(M.METHODS)
