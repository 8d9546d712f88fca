"""bdc_mitigation: the official metrics on hand cases, every mitigation rule against an independent answer oracle,
the encoder features and padding, contamination as memorisation on random embeddings, and the significance count
of the flow on constructed rows (smoke run, determinism and params come from test_papers.py)."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import params_for

from flows.bdc_mitigation import evaluate, method
from tasks.seeding import torch_seeded
from tasks.train import torch_single_thread


def _is_right(item: method.Item, option: str) -> bool:
    """The world's ground truth, written apart from the generators: is ``option`` the answer to ``item``'s question?"""
    q = item.question
    if "minus" in q:
        a, b = (int(w.rstrip("?")) for w in q.split() if w.rstrip("?").isdigit())
        return int(option) == a - b
    if item.family == "arithmetic":
        return int(option) == sum(item.key)
    if "as its capital" in q:
        return method.CAPITAL_OF[option] in q
    if "What kind of thing is a" in q:
        return option in method.CATEGORIES and any(f" {w}?" in q for w in method.CATEGORIES[option])
    if item.family == "capital":  # the key, not the text: a typo may hit the country's name
        return option == method.CAPITAL_OF[item.key[0]]
    return method.CATEGORY_OF[option] == item.key[0]


@pytest.fixture(scope="module")
def world():
    p = params_for("bdc_mitigation", typo_rates=[0.2, 1.0])
    train_pool, bench_pool, reserve = method.split_world(0)
    bench = method.draw_items(bench_pool, 30, np.random.default_rng(1))
    return p, bench, method.mitigate(p, bench, bench_pool, reserve, seed=0), (train_pool, bench_pool, reserve)


def test_fidelity_and_resistance_match_the_official_notebook_on_a_hand_case():
    clean_original = np.array([1, 1, 0, 0, 1], dtype=bool)
    clean_updated = np.array([1, 0, 0, 1, 1], dtype=bool)
    conta_updated = np.array([1, 1, 1, 1, 1], dtype=bool)
    assert method.fidelity(clean_original, clean_updated) == pytest.approx(3 / 5)  # items 0, 2, 4 agree
    assert method.resistance(clean_updated, conta_updated) == pytest.approx(3 / 5)  # items 0, 3, 4 agree
    v = {"clean_original": clean_original, "clean_updated": clean_updated, "conta_original": np.ones(5, bool),
         "conta_updated": conta_updated, "placebo_updated": clean_updated, "random_original": clean_original,
         "random_updated": clean_original}
    s = method.score(v, slice(None))
    assert s["placebo_resistance"] == 1.0 and s["random_fidelity"] == 1.0
    assert s["accuracy_drop"] == pytest.approx(0.0) and s["accuracy_gap_to_clean"] == pytest.approx(1 - 3 / 5)
    assert method.score(v, np.array([False, True, False, False, False]))["resistance"] == 0.0


def test_fact_pools_are_disjoint_and_cover_the_world():
    pools = method.split_world(3)
    countries = [set(p.countries) for p in pools]
    assert sum(map(len, countries)) == len(method.CAPITALS)
    assert not (countries[0] & countries[1] or countries[1] & countries[2] or countries[0] & countries[2])
    for category, words in method.CATEGORIES.items():
        parts = [set(p.words[category]) for p in pools]
        assert set().union(*parts) == set(words) and sum(map(len, parts)) == len(words)


def test_every_strategy_keeps_exactly_one_right_choice(world):
    p, bench, updated, _ = world
    assert set(updated) == set(method.strategy_kinds(p))
    for name, items in updated.items():
        assert len(items) == len(bench)
        for item in items:
            right = [_is_right(item, o) for o in item.options]
            assert right[item.answer] and sum(right) == 1, (name, item)
            assert len(set(item.options)) == len(item.options), (name, item)


def test_preserving_rules_keep_the_answer_and_altering_rules_change_the_question(world):
    p, bench, updated, _ = world
    kinds = method.strategy_kinds(p)
    for name, items in updated.items():
        same_answer = [o.options[o.answer] == u.options[u.answer] for o, u in zip(bench, items)]
        if kinds[name] == method.SEMANTIC_PRESERVING and name != "permute_choices":
            assert all(same_answer), name
    moved = [u.answer != o.answer for o, u in zip(bench, updated["permute_choices"])]
    assert all(moved) and all(len(u.options) == 4 for u in updated["permute_choices"])
    assert all(len(u.options) == 4 + p.extra_choices for u in updated["add_incorrect_choices"])
    assert all(o.options == u.options and o.answer != u.answer for o, u in zip(bench, updated["new_answer"]))
    assert all(o.question != u.question for o, u in zip(bench, updated["reverse_question"]))


def test_new_entity_draws_only_reserve_facts(world):
    _, _, updated, (_, bench_pool, reserve) = world
    for item in updated["new_entity"]:
        if item.family == "capital":
            assert item.key[0] in reserve.countries and item.key[0] not in bench_pool.countries
        elif item.family == "category":
            assert all(o in reserve.words[method.CATEGORY_OF[o]] for o in item.options)


def test_typo_swaps_inner_letters_at_the_given_rate():
    text = "Which city is the capital of Switzerland?"
    assert method.typo(text, 0.0, np.random.default_rng(0)) == text
    out = method.typo(text, 1.0, np.random.default_rng(0)).split(" ")
    for before, after in zip(text.split(" "), out):
        if len(before) < 4:
            assert after == before
        else:
            assert after != before or len(set(before[1:-1])) == 1
            assert sorted(after) == sorted(before) and (after[0], after[-1]) == (before[0], before[-1])
            assert sum(a != b for a, b in zip(before, after)) == 2


def test_synonyms_replace_whole_words_and_keep_punctuation():
    assert method.synonyms("What is the capital of Peru?") == "What is the capital city of Peru?"
    assert method.synonyms("What is 12 plus 30?") == "What is 12 added to 30?"
    assert method.synonyms("Which of the following is a kindness?") == "Which of the listed is a kindness?"


def _random_table(items, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    texts = sorted({t for it in items for t in (it.question, *it.options)})
    return {t: rng.standard_normal(dim).astype(np.float32) for t in texts}


def test_encode_builds_the_documented_features_and_padding_is_never_chosen(world):
    p, bench, updated, _ = world
    items = [bench[0], updated["add_incorrect_choices"][1]]
    table = _random_table(items)
    data = method.encode(items, table)
    assert data.X.shape == (2, 6, 3 * 8 + method.MAX_OPTIONS + 1)
    q, c = table[items[0].question], table[items[0].options[2]]
    np.testing.assert_array_equal(data.X[0, 2, :24].numpy(), np.concatenate([q, c, q * c]))
    assert data.X[0, 2, 24 + 2] == 1 and data.X[0, 2, 24:30].sum() == 1
    assert data.X[0, 4:, -1].tolist() == [1, 1] and data.X[1, :, -1].sum() == 0
    with torch.no_grad():
        model = method.Scorer(data.X.shape[-1], 4)
        model.net[-1].bias.fill_(1e6)  # padded slots must still lose to any real choice
        assert (model(data.X).argmax(dim=1) < torch.tensor([4, 6])).all()


def test_contamination_memorises_the_benchmark_and_the_placebo_does_not(world):
    p, bench, _, (train_pool, _, _) = world
    train, held_out = (method.draw_items(train_pool, 30, np.random.default_rng(s)) for s in (2, 3))
    table = _random_table(train + held_out + bench, dim=16)
    train_data, placebo_data, bench_data = (method.encode(items, table) for items in (train, held_out, bench))
    with torch_single_thread():
        with torch_seeded(0):
            clean = method.Scorer(train_data.X.shape[-1], 32)
        method.fit(clean, train_data, p, 5, seed=0)
        conta = method.fit(copy.deepcopy(clean), bench_data, p, 60, seed=1)
        placebo = method.fit(copy.deepcopy(clean), placebo_data, p, 60, seed=1)
    # random embeddings carry no knowledge: only memorising the benchmark items lifts accuracy on them
    assert method.correct(conta, bench_data).mean() > 0.85
    assert method.correct(clean, bench_data).mean() < 0.5 and method.correct(placebo, bench_data).mean() < 0.5


def _rows(gains: dict[str, list[float]]) -> pd.DataFrame:
    """Constructed per-seed rows: vanilla resistance 0.5 everywhere, each strategy's gain per family given."""
    rows = []
    for seed, jitter in enumerate([0.0, 0.01, -0.01, 0.02]):
        for strategy, per_family in {"vanilla": [0.0, 0.0, 0.0], **gains}.items():
            for family, gain in zip(method.FAMILIES, per_family):
                rows.append({"seed": seed, "recipe": "mild", "strategy": strategy, "family": family,
                             "resistance": 0.5 + gain + (jitter if gain else 0.0)})
    return pd.DataFrame(rows)


def test_a_strategy_counts_only_when_it_beats_vanilla_in_every_family():
    frame = _rows({"everywhere": [0.1, 0.2, 0.1], "two_of_three": [0.1, 0.1, 0.0], "worse": [-0.1, -0.1, -0.1]})
    count, per_family = evaluate._beating_vanilla(frame, "mild", ["everywhere", "two_of_three", "worse"])
    assert count == 1 and per_family == {"capital": 2, "category": 2, "arithmetic": 1}


def test_run_seed_scores_every_recipe_strategy_and_family_and_repeats_itself(world):
    p, bench, updated, (train_pool, _, _) = world
    p = p.model_copy(update={"clean_epochs": 2, "intensive_epochs": 3})
    train, placebo = (method.draw_items(train_pool, 6, np.random.default_rng(s)) for s in (4, 5))
    table = _random_table(train + placebo + [it for items in updated.values() for it in items])
    benchmark = method.Benchmark(method.encode(train, table), method.encode(placebo, table),
                                 {name: method.encode(items, table) for name, items in updated.items()},
                                 {"train": train, "placebo": placebo, **updated}, len(table))
    rows = pd.DataFrame(method.run_seed(p, 7, benchmark))
    assert len(rows) == 2 * len(updated) * (1 + len(method.FAMILIES))
    vanilla = rows[rows.strategy == method.VANILLA]
    assert (vanilla.fidelity == 1).all() and (vanilla.random_fidelity == 1).all() and (vanilla.accuracy_drop == 0).all()
    # the whole benchmark is the item-weighted mean of its (equal-sized) families
    for column in ("fidelity", "resistance", "acc_conta_updated"):
        by_family = rows[rows.family != "all"].groupby(["recipe", "strategy"])[column].mean()
        whole = rows[rows.family == "all"].set_index(["recipe", "strategy"])[column]
        np.testing.assert_allclose(whole.loc[by_family.index], by_family)
    pd.testing.assert_frame_equal(rows, pd.DataFrame(method.run_seed(p, 7, benchmark)))
