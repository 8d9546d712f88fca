"""coser_gca: the world, the GCA loop, the judges and the metrics against independent references (smoke run,
determinism and params come from test_papers.py)."""

import re

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.coser_gca import method
from tasks.lm import GPTConfig, Tokenizer, make_gpt, sequence_log_likelihood


@pytest.fixture(scope="module")
def world():
    p = params_for("coser_gca", smoke=False, train_books=12, test_books=4)
    train, test = method.make_world(p, seed=7)
    return p, train, test


def test_strip_thoughts_matches_a_regex():
    texts = ["[ feel glad want feast ] egad laugh @ ada", "no thought here @ env", "a [ b ] c [ d e ] f",
             "[ unclosed thought"]
    for text in texts:
        expected = " ".join(re.sub(r"\[[^\]]*(\]|$)", " ", text).split())
        assert method.strip_thoughts(text) == expected


def test_authentic_turns_follow_the_traits_and_inauthentic_ones_do_not(world):
    p, train, _ = world
    decisions_right, n = 0, 0
    for s in train:
        by_name = {c.name: c for c in s.characters}
        for t in s.turns:
            if t.speaker == method.ENV:
                continue
            c = by_name[t.speaker]
            words = set(method.content_of(t.speech).split())
            if t.thought is None:                              # the decision: fixed by temperament and allegiance
                assert method.content_of(t.speech) == f"decide {method.ACTIONS[c.temperament]} {c.allegiance}"
                continue
            others = {w for k, pool in method.TEMPERAMENTS.items() if k != c.temperament for w in pool}
            assert words & set(method.TEMPERAMENTS[c.temperament]) and not words & others
            assert method.MOODS[c.temperament] in t.thought
    # the inauthentic corpus keeps prompts and speakers but its decisions ignore the traits (~1/6 right)
    auth, inauth = method.corpus(train, "authentic", p, 0), method.corpus(train, "inauthentic", p, 0)
    assert len(auth) == len(inauth)
    for (pa, ta), (pi, ti) in zip(auth, inauth):
        assert pa.split(";")[-1] == pi.split(";")[-1]          # same goal, profile and cue
        if ta.startswith("decide"):
            n += 1
            decisions_right += ta == ti
    assert n >= 20 and decisions_right / n < 0.5
    # no_thoughts = authentic without the bracketed spans
    for (pa, ta), (pn, tn) in zip(auth, method.corpus(train, "no_thoughts", p, 0)):
        assert pa == pn and tn == method.strip_thoughts(ta)


def test_judge_recovers_traits_and_drops_to_chance_on_shuffled_speakers(world):
    _, train, test = world
    judge = method.TraitJudge(train)
    texts, chars = [], []
    for s in test:
        by_name = {c.name: c for c in s.characters}
        for t in s.turns:
            if t.thought is not None:
                texts.append(method.content_of(t.speech))
                chars.append(by_name[t.speaker])
    assert judge.accuracy(texts, chars) > 0.95
    shuffled = [chars[i] for i in np.random.default_rng(0).permutation(len(chars))]
    assert judge.accuracy(texts, shuffled) < 0.7                # chance: (1/3 + 1/2) / 2 plus trait coincidences


def test_nsp_follows_the_hand_over_on_held_out_dialogues(world):
    _, train, test = world
    nsp = method.NextSpeakerPredictor(train)
    right = total = 0
    for s in test:
        candidates = [c.name for c in s.characters] + [method.ENV, method.END]
        for i, t in enumerate(s.turns):
            truth = s.turns[i + 1].speaker if i + 1 < len(s.turns) else method.END
            right += nsp.predict(candidates, t) == truth
            total += 1
    assert right / total > 0.95


class _FixedNSP:
    """A stub next-speaker predictor that always answers ``answer``."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def predict(self, candidates, last):
        return self.answer


@pytest.fixture(scope="module")
def untrained(world):
    p = params_for("coser_gca", smoke=False, train_books=12, test_books=4, max_rounds=9)
    tok = Tokenizer(method.vocabulary(), "word")
    return p, tok, make_gpt(GPTConfig(len(tok), method.prompt_length(p) + p.max_new, 1, 2, 32), seed=0)


def _invariants(sims, p):
    for sim in sims:
        scene, turns = sim["scene"], sim["turns"]
        assert turns[:p.continue_from] == list(scene.turns[:p.continue_from])   # ground-truth prefix
        majors = {c.name for c in scene.characters}
        assert all(t.speaker in majors | {method.ENV} for t in turns)
        assert all(a.speaker != b.speaker for a, b in zip(turns, turns[1:]))    # never the same speaker twice
        assert all("[" not in t.speech and "]" not in t.speech for t in turns)  # thoughts never broadcast


def test_gca_loop_with_the_learned_nsp(world, untrained):
    _, train, test = world
    p, tok, model = untrained
    sims = method.gca_simulate(model, tok, test[:6], method.NextSpeakerPredictor(train), p, seed=0)
    _invariants(sims, p)
    assert all(p.end_min_round + 1 <= len(s["turns"]) <= p.max_rounds for s in sims)


def test_gca_loop_rejects_early_end_and_invalid_speakers(world, untrained):
    _, _, test = world
    p, tok, model = untrained
    # an NSP that always says <END CHAT>: rejected (random fallback) until round end_min_round, accepted there
    sims = method.gca_simulate(model, tok, test[:6], _FixedNSP(method.END), p, seed=0)
    _invariants(sims, p)
    for s in sims:
        assert len(s["turns"]) == p.end_min_round + 1
        assert s["invalid"] == p.end_min_round - p.continue_from
    # an NSP naming nobody in the scene: every simulated round falls back, the scene runs to max_rounds
    sims = method.gca_simulate(model, tok, test[:6], _FixedNSP("nobody"), p, seed=0)
    _invariants(sims, p)
    for s in sims:
        assert len(s["turns"]) == p.max_rounds and s["invalid"] == p.max_rounds - p.continue_from


def test_option_likelihoods_match_one_at_a_time_scoring(world):
    p, _, test = world
    tok = Tokenizer(method.vocabulary(), "word")
    model = make_gpt(GPTConfig(len(tok), method.prompt_length(p) + p.max_new, 2, 2, 32), seed=1)
    prompts = [method.agent_prompt(test[0].characters[0], test[0].goal, [t.broadcast() for t in test[0].turns[:3]], p),
               method.agent_prompt(test[1].characters[1], test[1].goal, [], p)]
    got = method.option_log_likelihoods(model, tok, prompts, method.OPTIONS, p)
    padded = method.encode_prompts(tok, prompts, method.prompt_length(p))
    for i in range(len(prompts)):
        for j, option in enumerate(method.OPTIONS):
            want = sequence_log_likelihood(model, padded[i], torch.tensor(tok.encode(option, eos=True)))
            assert got[i, j] == pytest.approx(want, abs=1e-4)


def test_reference_scores_on_identical_and_disjoint_dialogues(world):
    p, _, test = world
    scene = test[0]
    same = {"scene": scene, "turns": list(scene.turns)}
    assert method.reference_scores(same, p) == (pytest.approx(100.0), pytest.approx(1.0))
    other = [method.Turn("zz", None, "x") for _ in scene.turns]
    bleu, rouge = method.reference_scores({"scene": scene, "turns": other}, p)
    assert bleu < 5 and rouge < 0.05


def test_permuted_profiles_keep_names_and_change_traits(world):
    _, _, test = world
    profiles = method.permuted_profiles(test, seed=0)
    changed = 0
    for s, mapping in zip(test, profiles):
        assert set(mapping) == {c.name for c in s.characters}
        changed += sum(mapping[c.name] != c for c in s.characters)
    assert changed > len(test)                                  # most agents get someone else's traits


def test_gains_over_the_trait_ignoring_baseline_are_sanity_checks_and_the_level_claim_keeps_its_control():
    from flows.coser_gca.claims import PAPER

    # the baseline differs from the authentic corpus only in its trait-following rate (0 vs 1), so its gains are
    # that knob read through a model; the LifeChoice level is still a claim against the permuted-profile control
    by_id = {c.id: c for c in PAPER.claims}
    for metric in ("fidelity", "life_choice", "bleu", "rouge_l"):
        gain = by_id[f"{metric}_gain_over_baseline"]
        assert gain.role == "sanity" and gain.control is None and "trait-following" in gain.text
    level = by_id["life_choice_accuracy"]
    assert level.role == "claim" and level.control.metric == "models.authentic_permuted_profiles.life_choice.mean"
