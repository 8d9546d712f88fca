"""creative_composition: the planted log's composition, the filters and MinHash dedup on hand cases and against exact
Jaccard, the clusterer and zero-shot coder on separable blobs, JSD against its closed form, and the JSONL hook
(the smoke run, determinism and params come from test_papers.py)."""

import json
import math

import numpy as np
import pytest
from conftest import params_for

from flows.creative_composition import method
from flows.creative_composition.method import sweep_settings


def test_category_counts_plant_the_creative_share_and_its_mix():
    p = params_for("creative_composition", smoke=False)
    counts = method.category_counts(p, 0.3)
    assert sum(counts.values()) == p.n_prompts
    creative = sum(counts[c] for c in method.CREATIVE)
    assert creative == round(0.3 * p.n_prompts)
    assert counts["story_script"] == round(creative * method.CREATIVE_MIX["story_script"])
    others = [counts[c] for c in method.CATEGORIES if c not in method.CREATIVE]
    assert max(others) - min(others) <= 1


def test_corpus_holds_the_planted_copies_junk_and_distinct_clean_prompts():
    p = params_for("creative_composition", smoke=False, n_prompts=120)
    pool = method.generate_pool(p, seed=3)
    log = method.corpus(pool, p, 0.3, 0.25, 0.15, seed=3)
    is_copy, is_junk = np.isin(log, pool.copies), pool.truth[log] == method.JUNK
    assert is_copy.sum() == round(120 * 0.25 / 0.75) and is_junk.sum() == round((120 + is_copy.sum()) * 0.15 / 0.85)
    clean = log[~is_copy & ~is_junk]
    assert len(clean) == 120 and len({pool.texts[i] for i in clean}) == 120
    # every copy's source is in the log, is creative, and the copy keeps its category
    sources = pool.source[log[is_copy]]
    assert np.isin(sources, clean).all() and set(pool.truth[sources]) <= set(method.CREATIVE)
    assert (pool.truth[log[is_copy]] == pool.truth[sources]).all()
    assert len(set(sources)) <= p.heavy_users
    assert method.generate_pool(p, seed=3).texts == pool.texts  # seeded, reproducible


def test_filters_drop_each_kind_of_junk_and_keep_english_requests():
    p = params_for("creative_composition", smoke=False)
    texts = ["hi", "Schreibe ein Gedicht über den Herbst in Berlin für meine Freundin Anna.",
             "Give me a list of racial slurs to use against Brian.", "Summarize: " + "word " * (p.max_words + 1),
             "Write a short fantasy story about Maria, a nurse in Boston who meets a talking cat.",
             "Why does my Python code throw a KeyError when I loop over the dictionary?"]
    assert method.filter_mask(texts, p).tolist() == [False, False, False, False, True, True]


def test_minhash_estimates_the_exact_jaccard_of_shingles():
    p = params_for("creative_composition", smoke=False)
    a = "Write a heartfelt letter to my grandmother Rosa thanking her for helping me move."
    b = method.near_duplicate(a, np.random.default_rng(0))
    c = "What is the derivative of ln(x^2 + 1)? Show the steps."
    sa, sb, sc = (method.shingles(t) for t in (a, b, c))
    exact = lambda x, y: len(x & y) / len(x | y)
    ma, mb, mc = method.minhashes([a, b, c], p)
    # the MinHash estimate's standard error is sqrt(J(1-J)/num_perm) <= 0.045 at 128 permutations
    assert ma.jaccard(mb) == pytest.approx(exact(sa, sb), abs=0.15)
    assert ma.jaccard(mc) == pytest.approx(exact(sa, sc), abs=0.15) and exact(sa, sc) < 0.1


def test_dedup_keeps_the_first_of_each_near_duplicate_group():
    p = params_for("creative_composition", smoke=False)
    a = "Write a best man speech for Daniel's wedding in Lisbon, he is a firefighter."
    b = "Compose a chorus for a folk song about spring rain and gratitude."
    texts = [a, b, a.lower() + " Thanks!", "Please " + a[0].lower() + a[1:], b]
    assert method.minhash_dedup(method.minhashes(texts, p), p).tolist() == [True, True, False, False, False]


def test_dedup_quality_counts_surplus_copies_and_lost_groups():
    pool = method.Pool(texts=[""] * 6, truth=np.array(["poem"] * 6), source=np.array([0, 1, 2, 0, 0, 1]),
                       by_category={}, junk=np.array([], dtype=int), copies=np.array([3, 4, 5]))
    # groups {0, 3, 4}, {1, 5}, {2}: two survivors in the first (one surplus left), none in the second
    q = method.dedup_quality(pool, filtered=np.arange(6), unique=np.array([0, 3, 2]))
    assert q["copies_removed"] == pytest.approx(1 - 1 / 3) and q["unique_removed_by_dedup"] == pytest.approx(1 / 3)
    assert q["lost_by_category"] == {"poem": pytest.approx(1 / 3)}


def test_silhouette_picks_the_true_number_of_separated_blobs():
    p = params_for("creative_composition", smoke=False, k_grid=[2, 3, 5, 8])
    rng = np.random.default_rng(0)
    centres = np.eye(3, 10) * 5
    x = np.concatenate([c + 0.1 * rng.standard_normal((30, 10)) for c in centres])
    labels = method.cluster(x, p)
    assert len(np.unique(labels)) == 3
    assert all(len(np.unique(labels[i * 30:(i + 1) * 30])) == 1 for i in range(3))


def test_clusters_are_coded_to_the_nearest_description_and_scored():
    codebook = np.eye(len(method.CATEGORIES))
    embeddings = np.zeros((6, len(method.CATEGORIES)))
    embeddings[:3, method.CATEGORIES.index("poem")] = 1.0
    embeddings[3:, method.CATEGORIES.index("math")] = 1.0
    embeddings[2, method.CATEGORIES.index("coding")] = 0.5  # pulls one member, not the centroid's argmax
    clusters = np.array([0, 0, 0, 1, 1, -1])
    predicted = method.label_clusters(embeddings, clusters, codebook)
    assert [method.CATEGORIES[i] if i >= 0 else None for i in predicted] == ["poem"] * 3 + ["math"] * 2 + [None]
    share = method.shares(predicted)
    assert share[method.CATEGORIES.index("poem")] == pytest.approx(0.6) and method.creative_share(share) == pytest.approx(0.6)
    # truth: 3 poems, 2 math, 1 math left unclustered; F1(poem) = 1, F1(math) = 2*1*(2/3)/(1+2/3) = 0.8, others absent
    assert method.macro_f1(["poem"] * 3 + ["math"] * 3, predicted) == pytest.approx((1.0 + 0.8) / len(method.CATEGORIES))


def test_js_divergence_matches_its_closed_form():
    assert method.js_divergence(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5])
    m = (p + q) / 2
    kl = lambda a, b: sum(x * math.log2(x / y) for x, y in zip(a, b) if x > 0)
    assert method.js_divergence(p, q) == pytest.approx(0.5 * kl(p, m) + 0.5 * kl(q, m))
    code_math = method.suite_distribution(method.SUITES["code_math_heavy"])
    assert code_math.sum() == pytest.approx(1.0) and method.js_divergence(code_math, code_math) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="unknown categories"):
        method.suite_distribution({"cooking": 1.0})


def test_the_sweep_moves_one_knob_at_a_time_around_the_middle():
    p = params_for("creative_composition", smoke=False)
    settings = sweep_settings(p)
    central = (p.creative_share[1], p.duplicate_rate[1], p.junk_share[1])
    assert settings[0] == central and len(settings) == len(set(settings)) == 7
    assert all(sum(a != b for a, b in zip(s, central)) == 1 for s in settings[1:])


def test_real_prompts_jsonl_is_read_and_bad_lines_are_named(tmp_path):
    good = tmp_path / "prompts.jsonl"
    good.write_text("\n".join(json.dumps({"text": f"prompt {i}"}) for i in range(5)) + "\n\n", encoding="utf-8")
    assert method.load_prompts_jsonl(good, max_prompts=3) == ["prompt 0", "prompt 1", "prompt 2"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "ok"}) + "\n" + json.dumps({"prompt": "no text"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        method.load_prompts_jsonl(bad, max_prompts=10)
