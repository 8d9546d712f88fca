"""repr_shattering_ke: ROME's rank-one update against its defining constraint and an independent constrained least
squares, R on a hand case, the knowledge graph against its ring definition, the hooks against a manual forward, and
an edit on a small trained model (smoke run, determinism and params come from test_papers.py)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import params_for

from flows.repr_shattering_ke import method as M

TINY = dict(n_entities=16, n_walks=2000, epochs=30, d_model=32, edit_distances=[1, 2, 4], edits_per_distance=2,
            n_chains=40)


@pytest.fixture(scope="module")
def trained():
    p = params_for("repr_shattering_ke", **TINY)
    world = M.make_world(p, seed=1)
    torch.set_num_threads(1)
    return p, world, M.train_model(p, world, seed=1)


# ---------------------------------------------------------------------------- ROME's closed form
def test_rome_update_meets_its_constraint_and_moves_other_keys_by_the_closed_form():
    rng = np.random.default_rng(0)
    d, m, n = 5, 12, 200
    w, keys = rng.standard_normal((d, m)), rng.standard_normal((n, m))
    c = keys.T @ keys / n
    k_star, k_bar, v_star = rng.standard_normal(m), rng.standard_normal(m), rng.standard_normal(d)
    update = M.rome_update(w, c, k_bar, k_star, v_star)
    np.testing.assert_allclose((w + update) @ k_star, v_star, atol=1e-12)         # W' k* = v*
    assert np.linalg.matrix_rank(update) == 1
    u = np.linalg.solve(c, k_bar)
    k = rng.standard_normal(m)
    np.testing.assert_allclose(update @ k, (v_star - w @ k_star) * (u @ k) / (u @ k_star), atol=1e-12)


def test_rome_update_is_the_constrained_least_squares_minimiser():
    """With k_bar = k*, min |(W' - W) K^T|_F s.t. W' k* = v*, solved row by row from its KKT system."""
    rng = np.random.default_rng(1)
    d, m, n = 4, 7, 50
    w, keys = rng.standard_normal((d, m)), rng.standard_normal((n, m))
    c = keys.T @ keys / n
    k_star, v_star = rng.standard_normal(m), rng.standard_normal(d)
    update = M.rome_update(w, c, k_star, k_star, v_star)
    kkt = np.block([[2 * keys.T @ keys, k_star[:, None]], [k_star[None, :], np.zeros((1, 1))]])
    for row in range(d):   # each row delta_i: min |K delta_i|^2 s.t. delta_i . k* = v*_i - (W k*)_i
        rhs = np.concatenate([np.zeros(m), [v_star[row] - w[row] @ k_star]])
        np.testing.assert_allclose(update[row], np.linalg.solve(kkt, rhs)[:m], atol=1e-10)


def test_random_update_is_rank_one_with_the_same_norm():
    update = np.outer(np.arange(1.0, 4.0), np.ones(5))
    random = M.random_update_like(update, np.random.default_rng(0))
    assert np.linalg.matrix_rank(random) == 1 and np.linalg.norm(random) == pytest.approx(np.linalg.norm(update))
    assert not np.allclose(random / np.linalg.norm(random), update / np.linalg.norm(update))


# ---------------------------------------------------------------------------- shattering measure
def test_shattering_on_a_hand_case():
    d_orig = M.distance_matrix(np.array([[0.0], [1.0], [2.0]]))
    np.testing.assert_allclose(d_orig, [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    d_edit = M.distance_matrix(np.array([[0.0], [1.0], [3.0]]))      # the third point moves by 1
    assert M.shattering(d_orig, d_edit) == pytest.approx(2 / np.sqrt(12))   # |[[0,0,1],[0,0,1],[1,1,0]]| = 2
    assert M.shattering(d_orig, d_orig) == 0.0
    rotated = M.distance_matrix(np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]]))
    assert M.shattering(d_orig, rotated) == pytest.approx(0.0, abs=1e-12)    # a rigid motion does not shatter


def test_ring_distance_and_r2_of_means():
    assert M.ring_distance(1, 15, 16) == 2 and M.ring_distance(3, 11, 16) == 8 and M.ring_distance(5, 5, 16) == 0
    d = np.array([1, 1, 2, 2, 4, 4])
    assert M.r2_of_means(d, 3 * d + 1.0) == pytest.approx(1.0)
    assert M.r2_of_means(np.array([1, 1, 2, 2, 3, 3]), np.array([0, 0, 1, 1, 0, 0.0])) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(M.r2_of_means(d, np.array([0, 2, 1, 1, 0, 2.0])))      # flat means: no line to fit


def test_ring_geometry_finds_a_planted_ring_and_not_the_other_cycle():
    p = params_for("repr_shattering_ke", **TINY)
    world = M.make_world(p, seed=5)
    angle = 2 * np.pi * world.position[0] / world.n
    # chord length: monotone in ring distance (rounded so that equal ring distances tie exactly)
    d_ring = np.round(M.distance_matrix(np.column_stack([np.cos(angle), np.sin(angle)])), 9)
    assert M.ring_geometry(d_ring, world, 0) == pytest.approx(1.0)
    assert abs(M.ring_geometry(d_ring, world, 1)) < 0.3


# ---------------------------------------------------------------------------- the knowledge graph
def test_world_relations_are_ring_steps_and_walks_use_training_facts_only():
    p = params_for("repr_shattering_ke", **TINY)
    world = M.make_world(p, seed=3)
    n = world.n
    for r, (cycle, shift) in enumerate(world.relations):
        for x in range(n):
            y = world.objects[x, r]
            assert (world.position[cycle, y] - world.position[cycle, x]) % n == shift % n
            inverse = world.relations.index((cycle, -shift))
            assert world.objects[y, inverse] == x
    assert world.held_out.sum() == round(p.holdout_frac * world.objects.size)
    walks = M.walk_corpus(world, 500, p.walk_hops, np.random.default_rng(0)).numpy()
    entity = {int(t): i for i, t in enumerate(world.entity_ids)}
    relation = {int(t): i for i, t in enumerate(world.relation_ids)}
    assert (walks[:, 0] == world.tokenizer.bos).all() and (walks[:, -1] == world.tokenizer.eos).all()
    for row in walks[:50]:
        for h in range(p.walk_hops):
            x, r, y = entity[row[1 + 2 * h]], relation[row[2 + 2 * h]], entity[row[3 + 2 * h]]
            assert world.objects[x, r] == y and not world.held_out[x, r]


def test_sampled_edits_sit_at_their_ring_distance():
    p = params_for("repr_shattering_ke", **TINY)
    world = M.make_world(p, seed=4)
    edits = M.sample_edits(p, world, np.random.default_rng(0))
    assert len(edits) == 4 * p.edits_per_distance
    assert len({(e["subject"], e["relation"]) for e in edits}) == len(edits)
    for e in edits:
        cycle, _ = world.relations[e["relation"]]
        assert world.objects[e["subject"], e["relation"]] == e["old"]
        assert M.ring_distance(world.position[cycle, e["old"]], world.position[cycle, e["new"]], world.n) == e["d"]
        other = 1 - cycle
        assert e["d_other"] == M.ring_distance(world.position[other, e["old"]], world.position[other, e["new"]], world.n)


# ---------------------------------------------------------------------------- hooks and reads on a trained model
def test_the_small_model_learns_its_training_facts(trained):
    p, world, model = trained
    facts = np.argwhere(~world.held_out)
    assert M.fact_correct(model, world, facts[:, 0], facts[:, 1]).mean() >= 0.9


def test_entity_representations_match_a_manual_forward(trained):
    p, world, model = trained
    ids = torch.as_tensor(np.stack([np.full(world.n, world.tokenizer.bos), world.entity_ids], 1))
    with torch.no_grad():
        h = model.token(ids) + model.position(torch.arange(2))
        block = model.blocks[0]
        q, k, v = block.attention.qkv(block.ln1(h)).split(p.d_model, dim=2)
        heads = lambda z: z.view(world.n, 2, p.n_head, -1).transpose(1, 2)
        attended = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        h = h + block.attention.proj(attended.transpose(1, 2).reshape(world.n, 2, p.d_model))
        h = h + block.mlp(block.ln2(h))
    np.testing.assert_allclose(M.entity_representations(model, world, 0), h[:, 1].double().numpy(), atol=1e-5)


def test_mlp_site_reads_keys_and_values_and_adds_delta_only_downstream(trained):
    p, world, model = trained
    ids = M.fact_prompts(world, np.array([0, 1]), np.array([0, 3]))
    store: dict = {}
    with torch.no_grad():
        with M.mlp_site(model, 0, store):
            plain = model(ids)[0]
        w = M.output_matrix(model, 0)
        torch.testing.assert_close(store["value"], store["key"] @ w.weight.T + w.bias)
        where = torch.zeros(ids.shape)
        where[:, 1] = 1.0
        # a random delta: a constant vector would vanish in the next LayerNorm (mean subtraction)
        with M.mlp_site(model, 0, delta=3 * torch.randn(p.d_model, generator=torch.Generator().manual_seed(0)), where=where):
            nudged = model(ids)[0]
    torch.testing.assert_close(nudged[:, 0], plain[:, 0])           # causal: positions before the site unchanged
    assert (nudged[:, 1:] - plain[:, 1:]).abs().max() > 1e-3


def test_rome_edit_rewrites_the_fact_and_keeps_the_constraint(trained):
    p, world, model = trained
    corpus = M.walk_corpus(world, p.n_walks, p.walk_hops, M.numpy_rng(1, 1))
    c = M.key_second_moment(model, p.edit_layer, corpus)
    x, r = map(int, np.argwhere(~world.held_out)[5])
    cycle, _ = world.relations[r]
    new = int(world.order[cycle, (world.position[cycle, world.objects[x, r]] + 4) % world.n])
    update, info = M.rome_edit(model, p, world, c, x, r, new, np.random.default_rng(0))
    assert info["exactness"] < 1e-9 and np.linalg.matrix_rank(update, tol=1e-8) == 1
    edited = M.apply_update(model, p.edit_layer, update)
    prompt = M.fact_prompts(world, np.array([x]), np.array([r]))
    assert M.greedy_next(edited, prompt)[0] == world.entity_ids[new]
    assert M.greedy_next(model, prompt)[0] == world.entity_ids[world.objects[x, r]]   # the original is untouched
    # W' k* = v* in the model itself: the edited MLP's output at the site is the unedited one plus delta
    store_old, store_new = {}, {}
    with torch.no_grad(), M.mlp_site(model, p.edit_layer, store_old):
        model(prompt)
    with torch.no_grad(), M.mlp_site(edited, p.edit_layer, store_new):
        edited(prompt)
    site = M.site_index(p)
    moved = (store_new["value"][0, site] - store_old["value"][0, site]).norm().item()
    assert moved == pytest.approx(info["delta_norm"], rel=1e-4)


def test_seed_statistics_on_planted_rows():
    p = params_for("repr_shattering_ke", **TINY)
    rng = np.random.default_rng(0)
    rows = []
    for d in [0, 1, 2, 4]:
        for _ in range(6):
            rows.append({"d": d, "d_other": int(rng.integers(0, 9)), "R_rome": 0.1 * d, "R_random": 1.0,
                         "R_others_rome": 0.05 * d, "recall_drop_rome": 0.01 * d, "composition_drop_rome": 0.0,
                         "success": 1.0})
    s = M.seed_statistics(p, rows, seed=0)
    assert s["spearman_d_R"] == pytest.approx(1.0) and s["r2_d_R"] == pytest.approx(1.0)
    assert s["spearman_R_recall_drop"] == pytest.approx(1.0)
    assert s["far_minus_near_recall_drop"] == pytest.approx(0.04 - 0.015)   # far: d >= 4; near: d in {1, 2}
    assert s["control_recall_drop_same_object"] == 0.0
    assert abs(s["control_spearman_R_recall_drop_permuted"]) < 0.9
    assert np.isnan(s["spearman_d_R_random"])                                  # constant R: undefined
