"""CoSER's given-circumstance acting (GCA) on invented books, with tiny persona language models.

Read top to bottom:

1. **World.** Procedural "books": characters with discrete traits (temperament, verbosity, catchphrase,
   allegiance), scenes with a goal, and ground-truth dialogues from a trait-conditioned grammar. Every character
   turn carries an inner thought ``[ ... ]``; one turn per scene is a *decision*, fixed by the speaker's traits
   (the LifeChoice analog). Three training corpora come from the same scenes: **authentic** (CoSER-style),
   **inauthentic** (the same grammar ignoring the speaker's traits: generic synthetic role-play data) and
   **no-thoughts** (authentic with the inner thoughts removed: the paper's ablation).
2. **Persona models.** One small GPT (``tasks.lm``) per corpus, trained on GCA sequences: the speaking
   character's profile + the scene's goal + the recent broadcast history (thoughts stripped) -> its next turn.
3. **GCA simulation** (after ``gca_evaluation/main.py``): one agent per major character (the persona model
   conditioned on that character's profile), a rule-based Environment agent, and a next-speaker predictor (NSP,
   a logistic regression trained on ground-truth transitions); ``<END CHAT>`` accepted only from round
   ``end_min_round``; invalid NSP output -> random fallback among the other major characters and the
   Environment; the first ``continue_from`` rounds replay the ground truth; thoughts are stripped before a turn
   is broadcast to the other agents.
4. **Metrics.** BLEU (sacrebleu) and ROUGE-L (rouge_score) of the simulated against the original dialogue,
   thoughts removed; programmatic judges: Character Fidelity (accuracy of a bag-of-words trait classifier
   trained on ground-truth utterances), Anthropomorphism (1 - repetition rate), Storyline Consistency (the
   scene's decision happens); LifeChoice analog: pick the character's decision among all options by
   log-likelihood.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np
import torch
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from flows.coser_gca.params import Params
from paperflows.core.seeding import numpy_rng
from tasks.lm import GPTConfig, Tokenizer, cached_lm, make_gpt, sample, train_lm
from tasks.train import torch_single_thread

# ---------------------------------------------------------------- 1. the world's lexicon
TEMPERAMENTS = {"calm": ["perhaps", "quietly", "patience", "gently"],
                "angry": ["never", "fool", "enough", "curse"],
                "cheerful": ["wonderful", "splendid", "laugh", "delight"]}
MOODS = {"calm": "serene", "angry": "furious", "cheerful": "glad"}
ALLEGIANCES = {"crown": ["king", "loyal", "order"], "rebels": ["freedom", "revolt", "people"]}
ACTIONS = {"calm": "negotiate", "angry": "attack", "cheerful": "celebrate"}   # the decision a temperament takes
VERBOSITY = {"terse": 1, "verbose": 3}                # trait words (and filler words) per utterance
CATCHPHRASES = ["egad", "alas", "hark", "verily", "zounds", "aye", "forsooth", "blimey"]
FILLER = ["we", "must", "go", "now", "here", "road", "night", "tell", "me", "see", "this", "that"]
GOALS = ["treasure", "wedding", "trial", "escape", "feast", "duel", "voyage", "harvest"]
EVENTS = ["thunder", "footsteps", "silence", "bells", "rain", "smoke"]
NAMES = ["ada", "bram", "cora", "dane", "edda", "finn", "gwen", "hugo", "iris", "jory", "kara", "leo", "mira",
         "ned", "orla", "pip", "quin", "rhea", "sven", "tara", "ulf", "vera", "wren", "xan", "yara", "zeke"]
ENV, END = "env", "end"                              # the Environment agent and <END CHAT>
MARKUP = ["[", "]", ":", "|", ";", "@", "profile", "goal", "choose", "decide", "bye", "feel", "want"]
OPTIONS = [f"decide {a} {g}" for a, g in product(ACTIONS.values(), ALLEGIANCES)]   # LifeChoice: 6 options
MAX_SPEECH = 2 + 2 * max(VERBOSITY.values()) + 2 + 2   # catchphrase, trait + filler words, allegiance, goal, "@ x" (11) + 1 spare
VARIANTS = ("authentic", "inauthentic", "no_thoughts")
TRAITS = ("temperament", "allegiance")               # what the fidelity judge recovers


@dataclass(frozen=True)
class Character:
    name: str
    temperament: str
    verbosity: str
    catchphrase: str
    allegiance: str

    def profile(self) -> str:
        return f"profile {self.name} {self.temperament} {self.verbosity} {self.catchphrase} {self.allegiance}"


@dataclass(frozen=True)
class Turn:
    speaker: str            # a character's name or ENV
    thought: str | None     # the inner thought (None for the Environment and for decisions)
    speech: str             # what everyone hears, ending in "@ <addressee>"

    def broadcast(self) -> str:
        """What the other agents see: the speech, inner thought stripped."""
        return f"{self.speaker} : {self.speech}"


@dataclass(frozen=True)
class Scene:
    goal: str
    characters: tuple[Character, ...]
    turns: tuple[Turn, ...]


def vocabulary() -> list[str]:
    words = [w for pool in TEMPERAMENTS.values() for w in pool] + list(TEMPERAMENTS) + list(MOODS.values())
    words += [w for pool in ALLEGIANCES.values() for w in pool] + list(ALLEGIANCES) + list(ACTIONS.values())
    words += list(VERBOSITY) + CATCHPHRASES + FILLER + GOALS + EVENTS + NAMES + [ENV, END] + MARKUP
    return sorted(set(words))


def utterance(rng: np.random.Generator, c: Character, goal: str, addressee: str, authentic: bool) -> tuple[str, str]:
    """(thought, speech) of ``c``. Authentic: words follow ``c``'s traits; inauthentic: every trait is redrawn
    at random for this one utterance (the grammar and the scene stay right, the persona does not)."""
    if not authentic:
        c = Character(c.name, str(rng.choice(list(TEMPERAMENTS))), str(rng.choice(list(VERBOSITY))),
                      str(rng.choice(CATCHPHRASES)), str(rng.choice(list(ALLEGIANCES))))
    k = VERBOSITY[c.verbosity]
    words = list(rng.choice(TEMPERAMENTS[c.temperament], size=k)) + [str(rng.choice(ALLEGIANCES[c.allegiance]))]
    words += list(rng.choice(FILLER, size=k))
    if rng.random() < 0.5:
        words.append(goal)
    words = [str(w) for w in rng.permutation(words)]
    if rng.random() < 0.7:
        words.insert(0, c.catchphrase)
    thought = f"feel {MOODS[c.temperament]} want {goal}"
    return thought, " ".join(words + ["@", addressee])


def decision(c: Character, addressee: str, rng: np.random.Generator, authentic: bool) -> str:
    """The decision turn's speech: fixed by temperament and allegiance (authentic) or drawn at random."""
    option = f"decide {ACTIONS[c.temperament]} {c.allegiance}" if authentic else str(rng.choice(OPTIONS))
    return f"{option} @ {addressee}"


def make_book(rng: np.random.Generator, p: Params, names: list[str]) -> list[Character]:
    """``characters_per_book`` characters with independent uniform traits."""
    return [Character(n, str(rng.choice(list(TEMPERAMENTS))), str(rng.choice(list(VERBOSITY))),
                      str(rng.choice(CATCHPHRASES)), str(rng.choice(list(ALLEGIANCES)))) for n in names]


def make_scene(rng: np.random.Generator, p: Params, book: list[Character]) -> Scene:
    """A ground-truth dialogue (authentic): each speaker hands the word to another major character (or, rarely,
    the Environment); at turn 4 the Environment asks for a choice and the addressee decides at turn 5; the last
    turn says goodbye (addressed to ``end``)."""
    picked = rng.choice(len(book), size=p.scene_characters, replace=False)
    chars = tuple(book[i] for i in picked)
    goal = str(rng.choice(GOALS))
    n_turns = int(rng.integers(p.min_turns, p.max_turns + 1))
    by_name = {c.name: c for c in chars}
    speaker, turns = chars[0].name, []
    for t in range(n_turns):
        others = [c.name for c in chars if c.name != speaker]
        nxt = str(rng.choice(others))
        if t == 3:
            nxt = ENV                                   # the Environment will ask for the decision
        elif t != 4 and speaker != ENV and t < n_turns - 2 and rng.random() < p.address_env_rate:
            nxt = ENV
        if t == n_turns - 1:
            nxt = END
        if speaker == ENV:
            turns.append(Turn(ENV, None, env_speech(rng, goal, nxt, ask_choice=(t == 4))))
        elif t == 5:
            turns.append(Turn(speaker, None, decision(by_name[speaker], nxt, rng, authentic=True)))
        else:
            thought, speech = utterance(rng, by_name[speaker], goal, nxt, authentic=True)
            turns.append(Turn(speaker, thought, speech))
        speaker = nxt
    return Scene(goal, chars, tuple(turns))


def env_speech(rng: np.random.Generator, goal: str, addressee: str, ask_choice: bool) -> str:
    """The Environment agent's rule: an event (or the call for the scene's decision), handing the word on."""
    return f"choose @ {addressee}" if ask_choice else f"{rng.choice(EVENTS)} {goal} @ {addressee}"


def make_world(p: Params, seed: int) -> tuple[list[Scene], list[Scene]]:
    """(train scenes, held-out test scenes); test books have their own characters (fresh trait draws)."""
    rng = numpy_rng(seed, 0)
    scenes = []
    for b in range(p.train_books + p.test_books):
        names = [str(n) for n in rng.choice(NAMES, size=p.characters_per_book, replace=False)]
        book = make_book(rng, p, names)
        scenes.append([make_scene(rng, p, book) for _ in range(p.scenes_per_book)])
    train = [s for book in scenes[:p.train_books] for s in book]
    test = [s for book in scenes[p.train_books:] for s in book]
    return train, test


# ---------------------------------------------------------------- 2. GCA training sequences and persona models
def agent_prompt(c: Character, goal: str, history: list[str], p: Params) -> str:
    """What the agent playing ``c`` sees: the last ``history_turns`` broadcast turns, the goal, its profile.

    The profile comes last (the official prompt has it first): prompts are left-padded to one length, so the
    profile then sits at fixed positions just before the cue, which a tiny model learns to read in seconds."""
    recent = history[-p.history_turns:]
    return " | ".join(recent) + f" ; goal {goal} {c.profile()} :"


def target_text(turn: Turn, thoughts: bool) -> str:
    return f"[ {turn.thought} ] {turn.speech}" if (thoughts and turn.thought) else turn.speech


def corpus(scenes: list[Scene], variant: str, p: Params, seed: int) -> list[tuple[str, str]]:
    """(prompt, target) for every character turn. ``inauthentic`` re-voices each turn with trait-ignoring words
    (same scene, speakers and addressees); ``no_thoughts`` drops the inner thoughts."""
    rng = numpy_rng(seed, 1)
    pairs = []
    for s in scenes:
        by_name = {c.name: c for c in s.characters}
        turns = list(s.turns)
        if variant == "inauthentic":
            for i, t in enumerate(turns):
                if t.speaker == ENV:
                    continue
                addressee = t.speech.split("@")[-1].strip()
                if t.thought is None:
                    turns[i] = Turn(t.speaker, None, decision(by_name[t.speaker], addressee, rng, authentic=False))
                else:
                    turns[i] = Turn(t.speaker, *utterance(rng, by_name[t.speaker], s.goal, addressee, authentic=False))
        history = []
        for t in turns:
            if t.speaker != ENV:
                pairs.append((agent_prompt(by_name[t.speaker], s.goal, history, p),
                              target_text(t, thoughts=variant != "no_thoughts")))
            history.append(t.broadcast())
    return pairs


def prompt_length(p: Params) -> int:
    """Tokens of the longest possible agent prompt: history turns (name : speech |), "; goal g", profile, ":"."""
    return p.history_turns * (2 + MAX_SPEECH + 1) + 3 + 6 + 1


def encode_prompts(tok: Tokenizer, prompts: list[str], length: int) -> torch.Tensor:
    """Left-padded (with the pad id, ignored by the loss) so every prompt ends at the same position and a batch of
    agents can sample together: (n, length) int64."""
    rows = [tok.encode(x) for x in prompts]
    if max(map(len, rows)) > length:
        raise ValueError(f"a prompt needs {max(map(len, rows))} tokens > {length}")
    return torch.tensor([[tok.pad] * (length - len(r)) + r for r in rows], dtype=torch.long)


def training_tensor(tok: Tokenizer, pairs: list[tuple[str, str]], p: Params) -> torch.Tensor:
    """prompt (left-padded) + target + eos, right-padded: (n, prompt_length + max_new) int64."""
    P, L = prompt_length(p), prompt_length(p) + p.max_new
    prompts = encode_prompts(tok, [a for a, _ in pairs], P)
    rows = []
    for row, (_, target) in zip(prompts.tolist(), pairs):
        full = row + tok.encode(target, eos=True)
        if len(full) > L:
            raise ValueError("a target exceeds max_new")
        rows.append(full + [tok.pad] * (L - len(full)))
    return torch.tensor(rows, dtype=torch.long)


def persona_model(variant: str, train: list[Scene], p: Params, seed: int, data_dir: Path | None, smoke: bool):
    """The persona GPT trained on ``variant``'s corpus (cached under ``data_dir`` when given)."""
    tok = Tokenizer(vocabulary(), "word")
    config = GPTConfig(vocab_size=len(tok), context=prompt_length(p) + p.max_new, n_layer=p.n_layer,
                       n_head=p.n_head, d_model=p.d_model)

    def fit():
        data = training_tensor(tok, corpus(train, variant, p, seed), p)
        model = make_gpt(config, seed=seed)
        train_lm(model, data, epochs=p.epochs, batch_size=p.batch_size, lr=p.lr, seed=seed, pad=tok.pad)
        return model

    if data_dir is None:
        return fit(), tok
    world = {k: getattr(p, k) for k in ("train_books", "test_books", "characters_per_book", "scenes_per_book",
                                        "scene_characters", "min_turns", "max_turns", "address_env_rate",
                                        "history_turns", "d_model", "n_layer", "n_head", "epochs", "batch_size",
                                        "lr", "max_new")}
    key = {"variant": variant, "seed": seed, "smoke": smoke, "vocab": tok.itos, **world}
    return cached_lm(Path(data_dir) / f"lm_{variant}_seed{seed}.pt", key, fit), tok


# ---------------------------------------------------------------- 3. judges and the next-speaker predictor
def strip_thoughts(text: str) -> str:
    """Remove every ``[ ... ]`` span (official remove_inner_thoughts); an unclosed ``[`` drops the rest."""
    out, depth = [], 0
    for w in text.split():
        if w == "[":
            depth += 1
        elif w == "]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(w)
    return " ".join(out)


def addressee_of(speech: str) -> str | None:
    words = speech.split()
    return words[words.index("@") + 1] if "@" in words and words.index("@") + 1 < len(words) else None


def content_of(speech: str) -> str:
    """The words a judge reads: the speech without the hand-over ``@ x``."""
    return speech.split(" @ ")[0] if " @ " in speech else speech.split("@")[0].strip()


class TraitJudge:
    """Character Fidelity judge: one bag-of-words logistic regression per trait, fitted on ground-truth
    utterances (speech only) of the training books."""

    def __init__(self, scenes: list[Scene]) -> None:
        texts, labels = [], {t: [] for t in TRAITS}
        for s in scenes:
            by_name = {c.name: c for c in s.characters}
            for turn in s.turns:
                if turn.speaker != ENV and turn.thought is not None:
                    texts.append(content_of(turn.speech))
                    for t in TRAITS:
                        labels[t].append(getattr(by_name[turn.speaker], t))
        self.vectorizer = CountVectorizer(token_pattern=r"\S+").fit(texts)
        X = self.vectorizer.transform(texts)
        self.heads = {t: LogisticRegression(max_iter=1000).fit(X, labels[t]) for t in TRAITS}

    def accuracy(self, texts: list[str], characters: list[Character]) -> float:
        """Mean over traits of the fraction of ``texts`` whose predicted trait is their speaker's."""
        if not texts:
            return float("nan")
        X = self.vectorizer.transform(texts)
        return float(np.mean([np.mean(self.heads[t].predict(X) == np.array([getattr(c, t) for c in characters]))
                              for t in TRAITS]))


def nsp_features(candidate: str, last: Turn, current: str) -> list[float]:
    addressed = addressee_of(last.speech)
    return [float(candidate == addressed), float(candidate == current), float(candidate == ENV),
            float(candidate == END), float(candidate == END and addressed == END)]


class NextSpeakerPredictor:
    """NSP: a logistic ranker over the candidates (major characters, Environment, <END CHAT>), fitted on the
    ground-truth transitions; predicts the most probable candidate (validity is the GCA loop's business)."""

    def __init__(self, scenes: list[Scene]) -> None:
        X, y = [], []
        for s in scenes:
            candidates = [c.name for c in s.characters] + [ENV, END]
            for i, turn in enumerate(s.turns):
                nxt = s.turns[i + 1].speaker if i + 1 < len(s.turns) else END
                for c in candidates:
                    X.append(nsp_features(c, turn, turn.speaker))
                    y.append(int(c == nxt))
        self.model = LogisticRegression(max_iter=1000).fit(np.array(X), np.array(y))

    def predict(self, candidates: list[str], last: Turn) -> str:
        scores = self.model.predict_proba(np.array([nsp_features(c, last, last.speaker) for c in candidates]))[:, 1]
        return candidates[int(np.argmax(scores))]


# ---------------------------------------------------------------- 4. the GCA simulation
def parse_turn(speaker: str, generated: str) -> Turn:
    """A generated turn: the ``[ thought ]`` (if any) kept apart, the rest is the speech."""
    words = generated.split()
    thought = None
    if words[:1] == ["["] and "]" in words:
        close = words.index("]")
        thought = " ".join(words[1:close])
    # a turn is clipped to the grammar's longest speech so that a rambling agent cannot overflow the others' window
    return Turn(speaker, thought, " ".join(strip_thoughts(generated).split()[:MAX_SPEECH]))


def gca_simulate(model, tok: Tokenizer, scenes: list[Scene], nsp: NextSpeakerPredictor, p: Params, seed: int,
                 profiles: list[dict[str, Character]] | None = None) -> list[dict]:
    """Simulate every scene with the GCA loop, all scenes' speaking agents sampled in one batch per round.

    ``profiles[i]`` maps scene i's names to the profile its agents are given (default: the true ones; the
    permuted-profile control swaps them). Returns per scene: the simulated turns, NSP invalid count, rounds.
    """
    rng = numpy_rng(seed, 2)
    P = prompt_length(p)
    states = []
    for i, s in enumerate(scenes):
        majors = [c.name for c in s.characters]
        states.append({"scene": s, "turns": [], "speaker": s.turns[0].speaker, "done": False, "invalid": 0,
                       "profiles": profiles[i] if profiles else {c.name: c for c in s.characters},
                       "majors": majors, "candidates": majors + [ENV, END]})
    for r in range(p.max_rounds):
        active = [st for st in states if not st["done"]]
        if not active:
            break
        # 1. the current speakers talk (ground truth for the first continue_from rounds)
        to_generate = []
        for st in active:
            s = st["scene"]
            if r < p.continue_from:
                st["turns"].append(s.turns[r])
            elif st["speaker"] == ENV:
                asked = any(t.speaker == ENV and t.speech.startswith("choose") for t in st["turns"])
                addressee = str(rng.choice(st["majors"]))
                st["turns"].append(Turn(ENV, None, env_speech(rng, s.goal, addressee, ask_choice=(r >= 4 and not asked))))
            else:
                to_generate.append(st)
        if to_generate:
            prompts = [agent_prompt(st["profiles"][st["speaker"]], st["scene"].goal,
                                    [t.broadcast() for t in st["turns"]], p) for st in to_generate]
            ids = encode_prompts(tok, prompts, P)
            out = sample(model, ids, p.max_new, temperature=p.temperature, seed=seed * 1000 + r, eos=tok.eos)
            for st, row in zip(to_generate, out[:, P:].tolist()):
                st["turns"].append(parse_turn(st["speaker"], tok.decode(row)))
        # 2. the NSP picks who speaks next (ground truth during the replayed prefix)
        for st in active:
            s, current = st["scene"], st["speaker"]
            if r < p.continue_from:
                nxt = s.turns[r + 1].speaker if r + 1 < len(s.turns) else END
            else:
                nxt = nsp.predict(st["candidates"], st["turns"][-1])
            if nxt == END and r >= p.end_min_round:
                st["done"] = True
            elif nxt in st["candidates"] and nxt not in (END, current):
                st["speaker"] = nxt
            else:                                    # invalid prediction: random fallback (official main.py)
                st["invalid"] += int(r >= p.continue_from)
                st["speaker"] = str(rng.choice([c for c in st["majors"] + [ENV] if c != current]))
    return [{"scene": st["scene"], "turns": st["turns"], "invalid": st["invalid"], "rounds": len(st["turns"])}
            for st in states]


# ---------------------------------------------------------------- 5. metrics
_BLEU = BLEU(effective_order=True)
_ROUGE = rouge_scorer.RougeScorer(["rougeL"])


def dialogue_text(turns: list[Turn] | tuple[Turn, ...]) -> str:
    return "\n".join(t.broadcast() for t in turns)


def reference_scores(sim: dict, p: Params) -> tuple[float, float]:
    """(BLEU, ROUGE-L F) of the simulated dialogue after the replayed prefix against the original's,
    thoughts removed on both sides (official calculate_bleu_rouge). BLEU on sacrebleu's 0-100 scale."""
    ref = dialogue_text(sim["scene"].turns[p.continue_from:])
    hyp = dialogue_text(sim["turns"][p.continue_from:])
    return float(_BLEU.sentence_score(hyp, [ref]).score), float(_ROUGE.score(ref, hyp)["rougeL"].fmeasure)


def judged_scores(sims: list[dict], judge: TraitJudge, p: Params) -> dict[str, float]:
    """Programmatic judges over the simulated (non-prefix) character turns of all scenes."""
    texts, chars, repeats, decided, invalid = [], [], [], [], []
    for sim in sims:
        by_name = {c.name: c for c in sim["scene"].characters}
        mine = [t for t in sim["turns"][p.continue_from:] if t.speaker != ENV]
        contents = [content_of(t.speech) for t in mine]
        texts += [c for c, t in zip(contents, mine) if not t.speech.startswith("decide")]
        chars += [by_name[t.speaker] for t in mine if not t.speech.startswith("decide")]
        repeats.append(np.mean([c in contents[:i] for i, c in enumerate(contents)]) if contents else 0.0)
        decided.append(float(any(t.speech.startswith("decide") for t in mine)))
        invalid.append(sim["invalid"])
    return {"fidelity": judge.accuracy(texts, chars), "anthropomorphism": float(1 - np.mean(repeats)),
            "storyline_consistency": float(np.mean(decided)), "nsp_invalid_per_scene": float(np.mean(invalid))}


@torch.no_grad()
def option_log_likelihoods(model, tok: Tokenizer, prompts: list[str], options: list[str], p: Params) -> np.ndarray:
    """log p(option + eos | prompt) for every prompt and option: (len(prompts), len(options))."""
    P = prompt_length(p)
    base = encode_prompts(tok, prompts, P)                                   # (n, P)
    opts = torch.tensor([tok.encode(o, eos=True) for o in options])          # (k, m): all options equally long
    n, k, m = len(prompts), len(options), opts.shape[1]
    ids = torch.cat([base.repeat_interleave(k, 0), opts.repeat(n, 1)], dim=1)  # (n k, P + m)
    log_p = torch.log_softmax(model(ids[:, :-1])[0], dim=-1)[:, P - 1:]      # predictions of the option tokens
    return log_p.gather(2, ids[:, P:, None])[..., 0].sum(1).view(n, k).numpy()


def life_choice(model, tok: Tokenizer, scenes: list[Scene], p: Params,
                profiles: list[dict[str, Character]] | None = None) -> float:
    """LifeChoice analog: at each held-out scene's decision point (ground-truth history up to the call for a
    choice), the share of scenes where the option of highest likelihood is the character's true decision."""
    prompts, answers = [], []
    for i, s in enumerate(scenes):
        k = next(j for j, t in enumerate(s.turns) if t.speech.startswith("decide"))
        speaker = s.turns[k].speaker
        c = (profiles[i] if profiles else {c.name: c for c in s.characters})[speaker]
        prompts.append(agent_prompt(c, s.goal, [t.broadcast() for t in s.turns[:k]], p))
        answers.append(OPTIONS.index(content_of(s.turns[k].speech)))
    ll = option_log_likelihoods(model, tok, prompts, OPTIONS, p)
    return float(np.mean(ll.argmax(1) == np.array(answers)))


def permuted_profiles(scenes: list[Scene], seed: int) -> list[dict[str, Character]]:
    """Control: every agent gets the profile of a character drawn from another held-out scene (its name kept)."""
    rng = numpy_rng(seed, 3)
    pool = [c for s in scenes for c in s.characters]
    out = []
    for s in scenes:
        mapping = {}
        for c in s.characters:
            other = pool[int(rng.integers(len(pool)))]
            mapping[c.name] = Character(c.name, other.temperament, other.verbosity, other.catchphrase, other.allegiance)
        out.append(mapping)
    return out


# ---------------------------------------------------------------- one seed
def evaluate(model, tok, test: list[Scene], nsp, judge, p: Params, seed: int, profiles=None) -> dict[str, float]:
    sims = gca_simulate(model, tok, test, nsp, p, seed, profiles)
    refs = np.array([reference_scores(s, p) for s in sims])
    return {"bleu": float(refs[:, 0].mean()), "rouge_l": float(refs[:, 1].mean()),
            **judged_scores(sims, judge, p), "life_choice": life_choice(model, tok, test, p, profiles),
            "rounds": float(np.mean([s["rounds"] for s in sims]))}


def run_seed(p: Params, seed: int, data_dir: str | None = None, smoke: bool = False) -> list[dict]:
    """One seed: a fresh world, three persona models, and the GCA evaluation of each (plus the authentic model
    with permuted profiles, the negative control). Rows: seed, model, metrics."""
    with torch_single_thread():
        train, test = make_world(p, seed)
        judge, nsp = TraitJudge(train), NextSpeakerPredictor(train)
        rows = [{"seed": seed, "model": "ground_truth", "fidelity": judge.accuracy(
            [content_of(t.speech) for s in test for t in s.turns if t.thought is not None],
            [{c.name: c for c in s.characters}[t.speaker] for s in test for t in s.turns if t.thought is not None])}]
        for variant in VARIANTS:
            model, tok = persona_model(variant, train, p, seed, Path(data_dir) if data_dir else None, smoke)
            rows.append({"seed": seed, "model": variant, **evaluate(model, tok, test, nsp, judge, p, seed)})
            if variant == "authentic":
                rows.append({"seed": seed, "model": "authentic_permuted_profiles",
                             **evaluate(model, tok, test, nsp, judge, p, seed, permuted_profiles(test, seed))})
    return rows
