"""case_bench: the official metric suite on a hand case, the z-tests against statsmodels and their closed forms, the
simulated panel against its logistic model, the power analysis against theory on homogeneous items, and the real
data loader on a file in the official schema."""

import json
import math

import numpy as np
import pytest
from conftest import params_for
from scipy import stats

from flows.case_bench import method
from tasks.agreement import sample_size_for_power, two_proportion_ztest


def test_compute_score_metrics_on_a_hand_case():
    safe_rate = np.array([0.9, 0.7, 0.2, 0.1, 0.6])  # truth: safe, safe, unsafe, unsafe, safe
    prob = np.array([0.8, 0.3, 0.6, 0.1, 0.9])  # said: safe, unsafe, safe, unsafe, safe
    s = method.casebench_scores(prob, safe_rate)
    assert s["accuracy"] == pytest.approx(3 / 5)
    assert s["safe_accuracy"] == pytest.approx(2 / 3) and s["unsafe_accuracy"] == pytest.approx(1 / 2)
    # F1(safe): precision 2/3, recall 2/3; F1(unsafe): precision 1/2, recall 1/2
    assert s["f1_safe"] == pytest.approx(2 / 3) and s["f1_unsafe"] == pytest.approx(1 / 2)
    assert s["pearson_x100"] == pytest.approx(100 * np.corrcoef(prob, safe_rate)[0, 1])
    assert s["brier"] == pytest.approx(np.mean((prob - safe_rate) ** 2))
    assert s["log_loss"] == pytest.approx(-np.mean(safe_rate * np.log(prob) + (1 - safe_rate) * np.log(1 - prob)), rel=1e-6)
    strict = method.casebench_scores(prob, safe_rate, threshold=0.85)
    assert strict["safe_accuracy"] == pytest.approx(1 / 3) and strict["unsafe_accuracy"] == 1.0


def test_child_related_crimes_are_forced_unsafe():
    child = [i for i, (name, _) in enumerate(method.CATEGORIES) if name == method.FORCED_UNSAFE][0]
    out = method.forced_safe_rate(np.array([0.9, 0.9]), np.array([child, 0]))
    assert out.tolist() == [0.0, 0.9] and len(method.CATEGORIES) == 45


def test_item_z_test_matches_statsmodels_and_gives_no_evidence_when_unanimous():
    a, b = np.array([9, 5, 10, 0]), np.array([2, 5, 10, 0])
    p = method.item_z_test(a, b, 10)
    assert p[0] == pytest.approx(two_proportion_ztest(9, 10, 2, 10)[1]) and p[1] == pytest.approx(1.0)
    assert p[2] == 1.0 and p[3] == 1.0


def test_minus_log10_p_is_exact_where_p_is_representable_and_finite_where_it_underflows():
    assert method.minus_log10_p(60, 100, 40, 100) == pytest.approx(-math.log10(two_proportion_ztest(60, 100, 40, 100)[1]))
    huge = method.minus_log10_p(90_000, 100_000, 10_000, 100_000)
    z = two_proportion_ztest(90_000, 100_000, 10_000, 100_000)[0]
    assert np.isfinite(huge) and huge == pytest.approx(-(math.log(2) + stats.norm.logsf(abs(z))) / math.log(10)) and huge > 300


def _homogeneous_panel(p, shift):
    n_fields = len(method.FIELDS)
    sign = np.r_[np.ones(3), -np.ones(3)]
    return method.Panel(category_harm=np.zeros(len(method.CATEGORIES)),
                        value_shift=np.tile(shift / n_fields * sign, (n_fields, 1)),
                        annotator_bias=np.zeros(p.annotator_pool), intensity_step=0.0, query_noise=0.0)


def test_panel_votes_follow_the_logistic_model():
    p = params_for("case_bench", smoke=False)
    panel = _homogeneous_panel(p, shift=1.0)
    rng = np.random.default_rng(0)
    queries = method.draw_queries(45, 40, rng)
    harm = method.query_harm(panel, queries, rng)
    votes = method.safe_votes(panel, harm, method.context_shift(panel, queries.safe_context), 20, rng)
    # safe context: every field value shifts by +1/6, so P(unsafe) = sigmoid(0 - 1) and P(safe) = sigmoid(1)
    assert votes.mean() / 20 == pytest.approx(1 / (1 + math.exp(-1.0)), abs=0.01)
    with pytest.raises(ValueError, match="exceed the pool"):
        method.safe_votes(panel, harm, harm, p.annotator_pool + 1, rng)


def test_empirical_power_at_the_formula_count_matches_its_target_on_homogeneous_items():
    p = params_for("case_bench", smoke=False)
    panel = _homogeneous_panel(p, shift=0.6)
    p_safe, p_unsafe = 1 / (1 + math.exp(-0.6)), 1 / (1 + math.exp(0.6))
    n = sample_size_for_power(p_safe, p_unsafe, power=0.8)
    queries = method.draw_queries(45, 30, np.random.default_rng(1))
    power = method.rejection_rate(panel, queries, n, 0.05, np.random.default_rng(2)).mean()
    null = method.rejection_rate(panel, queries, n, 0.05, np.random.default_rng(3), null=True).mean()
    assert abs(power - 0.8) < 0.04 and null < 0.07


def test_context_embedding_is_the_mean_of_its_field_sentences():
    sentences = np.random.default_rng(0).standard_normal((len(method.field_sentences()), 4))
    context = np.array([[0, 1, 2, 3, 4, 5], [5, 5, 5, 0, 0, 0]])
    emb = method.context_embeddings(sentences, context)
    expected = np.stack([sentences[[6 * f + v for f, v in enumerate(row)]].mean(0) for row in context])
    np.testing.assert_allclose(emb, expected)
    only_sender = method.context_embeddings(sentences, context, fields=method.FIELD_NAMES[:2])
    np.testing.assert_allclose(only_sender[0], sentences[[0, 7]].mean(0))


def test_real_data_loader_reads_the_official_schema(tmp_path):
    items = [{"scores": [1, 1, 2], "query": "q", "context": {}, "context_intended_to_be_safe": True,
              "safe_rate": 2 / 3, "category": "c"},
             {"scores": [2, 2, 2, 1], "query": "q", "context": {}, "context_intended_to_be_safe": False,
              "safe_rate": 0.25, "category": "c"}]
    path = tmp_path / "CASEBench_data.json"
    path.write_text(json.dumps(items))
    frame = method.load_casebench(path)
    assert frame["safe_votes"].tolist() == [2, 1] and frame["n_annotators"].tolist() == [3, 4]
    real = method.real_context_test(frame)
    assert real["safe_rate_safe_context"] == pytest.approx(2 / 3) and real["safe_rate_unsafe_context"] == pytest.approx(1 / 4)
    assert real["minus_log10_p"] == pytest.approx(-math.log10(two_proportion_ztest(2, 3, 1, 4)[1]))
    with pytest.raises(FileNotFoundError, match="CASEBench repository"):
        method.load_casebench(tmp_path / "missing.json")


def test_queries_are_templated_per_category_and_deterministic():
    a, b = method.make_queries(45, 2, seed=3), method.make_queries(45, 2, seed=3)
    assert a.texts == b.texts and len(a.texts) == 90
    assert a.texts[0].startswith(method.INTENSITY[a.intensity[0]]) and a.texts[0].endswith("?")
    items = method.items_of(a)
    assert items.safe_intended.tolist()[:4] == [True, False, True, False]
    assert (items.context[items.safe_intended] < 3).all() and (items.context[~items.safe_intended] >= 3).all()


def test_the_judges_context_gain_is_a_sanity_check_because_only_the_knob_puts_context_in_the_labels():
    from flows.case_bench.claims import PAPER

    p = params_for("case_bench", smoke=False)
    queries = method.draw_queries(45, 4, np.random.default_rng(0))
    off = method.draw_panel(p, 0.5, 0.0, np.random.default_rng(1))
    on = method.draw_panel(p, 0.5, 1.0, np.random.default_rng(1))
    # at the knob's null both contexts leave the label logit unchanged: nothing for J2 to learn that J1 lacks
    assert not method.context_shift(off, queries.safe_context).any() and not method.context_shift(off, queries.unsafe_context).any()
    assert (method.context_shift(on, queries.safe_context) > 0).all() and (method.context_shift(on, queries.unsafe_context) < 0).all()
    judge = next(c for c in PAPER.claims if c.id == "context_aware_judge_agrees_better")
    assert judge.role == "sanity" and judge.control is None
