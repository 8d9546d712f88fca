"""BDC mitigation assessment (Sun et al., ICML 2025) at laptop scale: the paper's pipeline and its two
question-level metrics, with a frozen small encoder as the "LLM" and rule-based mitigation strategies.

The pipeline (official code ``ASTRAL-Group/BDC_mitigation_assessment``, README steps 1-5):

1. take an *uncontaminated* (model, benchmark) pair: here the clean model never sees a benchmark item;
2. apply each mitigation strategy to the benchmark (the paper: GPT-4o rewrites; here: rules);
3. *contaminate* a copy of the clean model by fine-tuning it on the original benchmark, with a mild and an
   intensive recipe (the paper: ConStat fine-tuning; here: epochs of fine-tuning the scoring head);
4. take the binary evaluation vectors (per question: answered correctly or not) of the clean model on the
   original and updated benchmarks and of the contaminated model on the updated benchmark;
5. ``fidelity = mean(clean_updated == clean_original)`` and ``resistance = mean(clean_updated ==
   conta_updated)`` (``example/calculate_metrics.ipynb``, read, not copied).

The stand-in "LLM" is one model interface: frozen all-MiniLM-L6-v2 sentence embeddings (``tasks.embed``) of the
question ``e_q`` and of each choice ``e_c``, and a trainable MLP scoring ``[e_q, e_c, e_q * e_c, onehot(position)]``;
the answer is the choice with the highest score. Its knowledge comes from MiniLM (what a capital, a fruit or a
number is) and from a disjoint "pretraining" split of the same synthetic world.

The benchmark has three families, the stand-in for the paper's several benchmarks: capitals of real countries,
word categories and two-digit sums, four choices each. Strategies (official names where one exists):
semantic-preserving ``typo_<rate>`` (the typo rate is swept), ``synonyms``, ``paraphrase`` (syntactic),
``permute_choices``, ``add_incorrect_choices`` (the official ``incorrect_choice`` adds wrong options),
``irrelevant_context``, ``relevant_context``; semantic-altering ``new_answer`` (entity or number changed so that
another listed choice is right), ``new_entity`` (mimicking: same template, unseen entity and choices) and
``reverse_question`` (extending: the same fact asked from its other end).

Shapes: ``n`` items, ``K`` choices per item (4, or 4 + ``extra_choices``), ``D = 384`` embedding width,
``F = 3 D + MAX_OPTIONS + 1`` features per choice (the last one flags a padded slot).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from flows.bdc_mitigation.params import Params
from tasks.seeding import numpy_rng, torch_seeded
from tasks.train import mlp, predict, torch_single_thread, train

FAMILIES = ("capital", "category", "arithmetic")
MAX_OPTIONS = 6
SEMANTIC_PRESERVING = "semantic-preserving"
SEMANTIC_ALTERING = "semantic-altering"
VANILLA = "vanilla"

CAPITALS = (
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Portugal", "Lisbon"),
    ("the Netherlands", "Amsterdam"), ("Belgium", "Brussels"), ("Austria", "Vienna"), ("Switzerland", "Bern"),
    ("Sweden", "Stockholm"), ("Norway", "Oslo"), ("Denmark", "Copenhagen"), ("Finland", "Helsinki"),
    ("Poland", "Warsaw"), ("Greece", "Athens"), ("Hungary", "Budapest"), ("Ireland", "Dublin"), ("Czechia", "Prague"),
    ("Romania", "Bucharest"), ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"), ("Croatia", "Zagreb"),
    ("Ukraine", "Kyiv"), ("Russia", "Moscow"), ("Turkey", "Ankara"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"),
    ("Nigeria", "Abuja"), ("Ethiopia", "Addis Ababa"), ("Morocco", "Rabat"), ("Ghana", "Accra"), ("Senegal", "Dakar"),
    ("Japan", "Tokyo"), ("China", "Beijing"), ("India", "New Delhi"), ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"),
    ("Indonesia", "Jakarta"), ("the Philippines", "Manila"), ("Malaysia", "Kuala Lumpur"), ("South Korea", "Seoul"),
    ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Saudi Arabia", "Riyadh"), ("Pakistan", "Islamabad"),
    ("Afghanistan", "Kabul"), ("Canada", "Ottawa"), ("Mexico", "Mexico City"), ("Cuba", "Havana"),
    ("Brazil", "Brasilia"), ("Argentina", "Buenos Aires"), ("Chile", "Santiago"), ("Peru", "Lima"),
    ("Colombia", "Bogota"), ("Venezuela", "Caracas"), ("Australia", "Canberra"), ("New Zealand", "Wellington"),
    ("Iceland", "Reykjavik"), ("Estonia", "Tallinn"), ("Latvia", "Riga"), ("Lithuania", "Vilnius"),
)
CATEGORIES = {
    "fruit": ("apple", "banana", "cherry", "mango", "peach", "pear", "plum", "grape", "lemon", "kiwi", "apricot", "papaya"),
    "animal": ("dog", "cat", "horse", "tiger", "lion", "rabbit", "wolf", "zebra", "giraffe", "elephant", "fox", "bear"),
    "tool": ("hammer", "wrench", "screwdriver", "saw", "drill", "chisel", "pliers", "shovel", "rake", "axe", "mallet", "trowel"),
    "colour": ("red", "blue", "green", "yellow", "purple", "pink", "brown", "black", "white", "grey", "violet", "crimson"),
    "vehicle": ("car", "truck", "bus", "bicycle", "motorcycle", "tractor", "van", "scooter", "tram", "taxi", "train", "ambulance"),
    "musical instrument": ("guitar", "violin", "piano", "flute", "trumpet", "drum", "cello", "harp", "clarinet",
                           "saxophone", "trombone", "banjo"),
    "profession": ("doctor", "teacher", "lawyer", "nurse", "engineer", "farmer", "pilot", "chef", "plumber", "dentist",
                   "baker", "carpenter"),
    "sport": ("football", "tennis", "basketball", "golf", "hockey", "baseball", "cricket", "rugby", "volleyball",
              "boxing", "swimming", "skiing"),
    "piece of clothing": ("shirt", "jacket", "trousers", "dress", "skirt", "sweater", "coat", "scarf", "sock", "glove",
                          "hat", "blouse"),
    "piece of furniture": ("chair", "table", "sofa", "bed", "desk", "wardrobe", "shelf", "stool", "bench", "cabinet",
                           "dresser", "couch"),
    "drink": ("coffee", "tea", "juice", "milk", "water", "soda", "beer", "wine", "lemonade", "cocoa", "cider", "smoothie"),
    "body part": ("arm", "leg", "hand", "foot", "knee", "elbow", "shoulder", "finger", "toe", "ankle", "wrist", "chin"),
}
COUNTRY_OF = {capital: country for country, capital in CAPITALS}
CAPITAL_OF = dict(CAPITALS)
CATEGORY_OF = {word: category for category, words in CATEGORIES.items() for word in words}
# template 0 is the benchmark's wording; the "pretraining" split uses all three, so a paraphrase is no new wording
TEMPLATES = {
    "capital": ("What is the capital of {0}?", "Which city is the capital of {0}?",
                "{0} has its national government seated in which city?"),
    "category": ("Which of the following is a {0}?", "Which one of these options is a kind of {0}?",
                 "Among the choices, which is a {0}?"),
    "arithmetic": ("What is {0} plus {1}?", "What is the sum of {0} and {1}?", "If you add {0} and {1}, what do you get?"),
}
REVERSE_TEMPLATES = {"capital": "Which country has {0} as its capital?", "category": "What kind of thing is a {0}?",
                     "arithmetic": "What is {0} minus {1}?"}
RELEVANT_CONTEXT = {
    "capital": ("Every country has a capital city where its national government sits.",
                "A capital is not always the largest city of its country."),
    "category": ("Words can be sorted into groups by the kind of thing they name.",
                 "Many everyday objects belong to a well-known category."),
    "arithmetic": ("Adding two whole numbers gives their sum.", "To add two-digit numbers, add the tens and the ones."),
}
IRRELEVANT_CONTEXT = ("The library closes early on Sundays.", "A light rain fell over the harbour that morning.",
                      "Many people enjoy a short walk after dinner.", "The old bridge was painted green last year.")
# word -> synonym, applied to whole words of the question (the benchmark's templates are covered)
SYNONYMS = {"capital": "capital city", "following": "listed", "plus": "added to", "kind": "type", "choices": "options",
            "sum": "total", "add": "combine", "city": "town"}
SUM_RANGE = (11, 90)  # two-digit addends; the smallest keeps every new_answer addend positive


# ----------------------------------------------------------------------------------------------------------------
# 1. The synthetic benchmark world
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    """One multiple-choice question. ``key`` holds what the question is about: ``(country,)``, ``(category,)`` or
    ``(a, b)`` for a sum; ``answer`` indexes ``options``."""

    family: str
    key: tuple
    question: str
    options: tuple[str, ...]
    answer: int


@dataclass(frozen=True)
class Pool:
    """The facts a split may draw from: countries, and the words of each category (sums are drawn freely)."""

    countries: tuple[str, ...]
    words: dict[str, tuple[str, ...]]


def split_world(seed: int) -> tuple[Pool, Pool, Pool]:
    """Disjoint fact pools: "pretraining" (train and placebo items), benchmark, and a reserve that only the
    ``new_entity`` strategy draws from (so its entities are new to the contaminated model)."""
    rng = numpy_rng(seed, 0)
    countries = [CAPITALS[i][0] for i in rng.permutation(len(CAPITALS))]
    n_train, n_bench = len(countries) * 5 // 9, len(countries) * 3 // 9
    words = {c: [w[i] for i in rng.permutation(len(w))] for c, w in CATEGORIES.items()}
    cut = lambda lo, hi: {c: tuple(w[lo:hi]) for c, w in words.items()}
    return (Pool(tuple(countries[:n_train]), cut(0, 6)),
            Pool(tuple(countries[n_train:n_train + n_bench]), cut(6, 10)),
            Pool(tuple(countries[n_train + n_bench:]), cut(10, 12)))


def render(family: str, key: tuple, template: int) -> str:
    return TEMPLATES[family][template].format(*key)


def _shuffled(correct: str, wrong: list[str], rng: np.random.Generator) -> tuple[tuple[str, ...], int]:
    options = [correct, *wrong]
    order = rng.permutation(len(options))
    return tuple(options[i] for i in order), int(np.flatnonzero(order == 0)[0])


def draw_item(family: str, pool: Pool, rng: np.random.Generator, template: int = 0,
              avoid_key: tuple | None = None) -> Item:
    """A fresh four-choice item of ``family`` with facts from ``pool`` (``avoid_key``: not about this key)."""
    while True:
        if family == "capital":
            country, *others = rng.choice(pool.countries, size=4, replace=False)
            key, correct, wrong = (str(country),), CAPITAL_OF[country], [CAPITAL_OF[c] for c in others]
        elif family == "category":
            category, *others = rng.choice(list(pool.words), size=4, replace=False)
            key, correct = (str(category),), str(rng.choice(pool.words[category]))
            wrong = [str(rng.choice(pool.words[c])) for c in others]  # three distinct other categories
        else:
            a, b = (int(v) for v in rng.integers(*SUM_RANGE, size=2))
            s = a + b
            key, correct = (a, b), str(s)
            wrong = [str(s + d) for d in rng.choice([-10, -1, 1, 10], size=3, replace=False)]
        if key != avoid_key:
            options, answer = _shuffled(correct, wrong, rng)
            return Item(family, key, render(family, key, template), options, answer)


def draw_items(pool: Pool, per_family: int, rng: np.random.Generator, templates: tuple[int, ...] = (0,)) -> list[Item]:
    """``per_family`` items of every family; each item's template drawn from ``templates``."""
    return [draw_item(f, pool, rng, int(rng.choice(templates))) for f in FAMILIES for _ in range(per_family)]


# ----------------------------------------------------------------------------------------------------------------
# 2. Mitigation strategies: Item -> updated Item, one rule each
# ----------------------------------------------------------------------------------------------------------------

def typo(text: str, rate: float, rng: np.random.Generator) -> str:
    """Swap two adjacent inner letters in each word of 4+ characters with probability ``rate`` (first and last
    characters, and so punctuation, stay)."""
    words = text.split(" ")
    for k, w in enumerate(words):
        if len(w) >= 4 and rng.random() < rate:
            i = int(rng.integers(1, len(w) - 2))
            words[k] = w[:i] + w[i + 1] + w[i] + w[i + 2:]
    return " ".join(words)


def synonyms(text: str) -> str:
    return " ".join(SYNONYMS.get(w.rstrip("?,"), w.rstrip("?,")) + w[len(w.rstrip("?,")):] for w in text.split(" "))


def permute_choices(item: Item, rng: np.random.Generator) -> Item:
    """Rotate the choices by 1..K-1 places: the same question, the right answer at another position."""
    shift = int(rng.integers(1, len(item.options)))
    options = item.options[-shift:] + item.options[:-shift]
    return replace(item, options=options, answer=(item.answer + shift) % len(item.options))


def _extra_wrong(item: Item, pool: Pool, rng: np.random.Generator) -> str:
    """One more incorrect choice of the item's kind, not among its options."""
    while True:
        if item.family == "capital":
            option = CAPITAL_OF[str(rng.choice(pool.countries))]
        elif item.family == "category":
            category = str(rng.choice([c for c in pool.words if c != item.key[0]]))
            option = str(rng.choice(pool.words[category]))
        else:
            option = str(sum(item.key) + int(rng.choice([-20, -11, -9, -2, 2, 9, 11, 20])))
        if option not in item.options:
            return option


def add_incorrect_choices(item: Item, n_extra: int, pool: Pool, rng: np.random.Generator) -> Item:
    """Insert ``n_extra`` further wrong choices at random positions (the official ``incorrect_choice``)."""
    options, answer = list(item.options), item.answer
    for _ in range(n_extra):
        position = int(rng.integers(0, len(options) + 1))
        options.insert(position, _extra_wrong(replace(item, options=tuple(options)), pool, rng))
        answer += position <= answer
    return replace(item, options=tuple(options), answer=answer)


def new_answer(item: Item, rng: np.random.Generator) -> Item:
    """Change the entity or a number so that another listed choice becomes the right one; choices stay."""
    j = int(rng.choice([k for k in range(len(item.options)) if k != item.answer]))
    target = item.options[j]
    if item.family == "capital":
        key = (COUNTRY_OF[target],)
    elif item.family == "category":
        key = (CATEGORY_OF[target],)
    else:
        key = (item.key[0], int(target) - item.key[0])
    return replace(item, key=key, question=render(item.family, key, 0), answer=j)


def reverse_question(item: Item) -> Item:
    """Ask the same fact from its other end; each choice maps to its counterpart, so the answer keeps its place."""
    if item.family == "capital":
        question = REVERSE_TEMPLATES["capital"].format(item.options[item.answer])
        options = tuple(COUNTRY_OF[o] for o in item.options)
    elif item.family == "category":
        question = REVERSE_TEMPLATES["category"].format(item.options[item.answer])
        options = tuple(CATEGORY_OF[o] for o in item.options)
    else:
        a, b = item.key
        question = REVERSE_TEMPLATES["arithmetic"].format(a + b, b)
        options = tuple(str(int(o) - b) for o in item.options)
    return replace(item, question=question, options=options)


def strategy_kinds(p: Params) -> dict[str, str]:
    """Every strategy's name and kind, in report order (``vanilla``: no update)."""
    preserving = [f"typo_{r:g}" for r in p.typo_rates] + ["synonyms", "paraphrase", "permute_choices",
                                                            "add_incorrect_choices", "irrelevant_context",
                                                            "relevant_context"]
    return ({VANILLA: VANILLA} | {s: SEMANTIC_PRESERVING for s in preserving}
            | {s: SEMANTIC_ALTERING for s in ("new_answer", "new_entity", "reverse_question")})


def mitigate(p: Params, bench: list[Item], bench_pool: Pool, reserve: Pool, seed: int) -> dict[str, list[Item]]:
    """The updated benchmark of every strategy, item-aligned with ``bench`` (each strategy its own random stream)."""
    updated: dict[str, list[Item]] = {}
    for index, name in enumerate(strategy_kinds(p)):
        rng = numpy_rng(seed, 1, index)
        if name == VANILLA:
            out = list(bench)
        elif name.startswith("typo_"):
            rate = p.typo_rates[[f"typo_{r:g}" for r in p.typo_rates].index(name)]
            out = [replace(it, question=typo(it.question, rate, rng)) for it in bench]
        elif name == "synonyms":
            out = [replace(it, question=synonyms(it.question)) for it in bench]
        elif name == "paraphrase":
            out = [replace(it, question=render(it.family, it.key, int(rng.integers(1, 3)))) for it in bench]
        elif name == "permute_choices":
            out = [permute_choices(it, rng) for it in bench]
        elif name == "add_incorrect_choices":
            out = [add_incorrect_choices(it, p.extra_choices, bench_pool, rng) for it in bench]
        elif name == "irrelevant_context":
            out = [replace(it, question=f"{rng.choice(IRRELEVANT_CONTEXT)} {it.question}") for it in bench]
        elif name == "relevant_context":
            out = [replace(it, question=f"{rng.choice(RELEVANT_CONTEXT[it.family])} {it.question}") for it in bench]
        elif name == "new_answer":
            out = [new_answer(it, rng) for it in bench]
        elif name == "new_entity":
            out = [draw_item(it.family, reserve, rng, avoid_key=it.key) for it in bench]
        else:
            out = [reverse_question(it) for it in bench]
        updated[name] = out
    return updated


# ----------------------------------------------------------------------------------------------------------------
# 3. The frozen encoder and the benchmark with its features
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Encoded:
    """Items as model input: ``X`` (n, K, F) float32 choice features, ``y`` (n,) right-answer indices,
    ``family`` (n,) family names."""

    X: torch.Tensor
    y: torch.Tensor
    family: np.ndarray


def encode(items: list[Item], table: dict[str, np.ndarray]) -> Encoded:
    """Features ``[e_q, e_c, e_q * e_c, onehot(position), pad]`` per choice, K = the most choices of any item."""
    n, k = len(items), max(len(it.options) for it in items)
    dim = next(iter(table.values())).shape[0]
    X = np.zeros((n, k, 3 * dim + MAX_OPTIONS + 1), dtype=np.float32)
    for i, it in enumerate(items):
        q = table[it.question]
        for j, option in enumerate(it.options):
            c = table[option]
            X[i, j, :3 * dim] = np.concatenate([q, c, q * c])
            X[i, j, 3 * dim + j] = 1.0
        X[i, len(it.options):, -1] = 1.0
    return Encoded(torch.from_numpy(X), torch.tensor([it.answer for it in items]),
                   np.array([it.family for it in items]))


@dataclass(frozen=True)
class Benchmark:
    """The run's world, encoded once: ``train`` (the clean model's data), ``placebo`` (held-out, never benchmark),
    ``updated[strategy]`` (the benchmark after each strategy; ``vanilla`` is the original) and the raw items."""

    train: Encoded
    placebo: Encoded
    updated: dict[str, Encoded]
    items: dict[str, list[Item]]
    n_texts: int


def make_benchmark(p: Params, seed: int) -> Benchmark:
    """Draw the world, apply every strategy, and embed each distinct text once with MiniLM (the bottleneck)."""
    from tasks.embed import minilm_embed  # loads torch + sentence-transformers: not at import time

    train_pool, bench_pool, reserve = split_world(seed)
    rng = numpy_rng(seed, 2)
    train_items = draw_items(train_pool, p.train_per_family, rng, templates=(0, 1, 2))
    placebo_items = draw_items(train_pool, p.placebo_per_family, rng)
    bench = draw_items(bench_pool, p.bench_per_family, rng)
    updated = mitigate(p, bench, bench_pool, reserve, seed)
    every = train_items + placebo_items + [it for items in updated.values() for it in items]
    texts = sorted({t for it in every for t in (it.question, *it.options)})
    table = dict(zip(texts, minilm_embed(texts)))
    return Benchmark(encode(train_items, table), encode(placebo_items, table),
                     {name: encode(items, table) for name, items in updated.items()},
                     {"train": train_items, "placebo": placebo_items, **updated}, len(texts))


# ----------------------------------------------------------------------------------------------------------------
# 4. The model, contamination, and the metrics
# ----------------------------------------------------------------------------------------------------------------

class Scorer(nn.Module):
    """The scoring head: (n, K, F) choice features -> (n, K) scores, padded choices at -1e9."""

    def __init__(self, n_features: int, hidden: int):
        super().__init__()
        self.net = mlp(n_features - 1, [hidden], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x[..., :-1]).squeeze(-1).masked_fill(x[..., -1] > 0, -1e9)


def fit(model: nn.Module, data: Encoded, p: Params, epochs: int, seed: int) -> nn.Module:
    """Cross-entropy over the choices, Adam; batches ordered by ``seed``."""
    train(model, data.X, data.y, loss_fn=F.cross_entropy, epochs=epochs, batch_size=p.batch_size, lr=p.lr, seed=seed)
    return model


def correct(model: nn.Module, data: Encoded) -> np.ndarray:
    """The binary evaluation vector (n,): did the model pick the right choice."""
    return (predict(model, data.X).argmax(dim=1) == data.y).numpy()


def fidelity(clean_original: np.ndarray, clean_updated: np.ndarray) -> float:
    """Share of questions where the clean model's outcome on the updated benchmark equals that on the original."""
    return float(np.mean(clean_original == clean_updated))


def resistance(clean_updated: np.ndarray, conta_updated: np.ndarray) -> float:
    """Share of updated questions where the contaminated model's outcome equals the clean model's."""
    return float(np.mean(clean_updated == conta_updated))


def recipes(p: Params) -> dict[str, int]:
    """The paper's two contamination recipes, as fine-tuning epochs on the original benchmark."""
    return {"mild": p.mild_epochs, "intensive": p.intensive_epochs}


def run_seed(p: Params, seed: int, benchmark: Benchmark) -> list[dict]:
    """One seed: train the clean model, contaminate a copy with each recipe (and fine-tune another copy on the
    placebo items, the no-benchmark-exposure control), take every evaluation vector and score each strategy.

    Returns one row per (recipe, strategy, family) with ``family`` "all" for the whole benchmark: fidelity,
    resistance, the placebo's "resistance", the random guesser's fidelity, and the aggregate accuracies the paper
    criticises (accuracy drop, accuracy matching).
    """
    with torch_single_thread():
        with torch_seeded(seed):
            clean = Scorer(benchmark.train.X.shape[-1], p.hidden)
        fit(clean, benchmark.train, p, p.clean_epochs, seed)
        vanilla = benchmark.updated[VANILLA]
        clean_vectors = {name: correct(clean, data) for name, data in benchmark.updated.items()}
        guesser = numpy_rng(seed, 3)
        random_vectors = {name: guesser.integers(0, (data.X[..., -1] == 0).sum(dim=1).numpy()) == data.y.numpy()
                          for name, data in benchmark.updated.items()}
        rows = []
        for recipe, epochs in recipes(p).items():
            contaminated = fit(copy.deepcopy(clean), vanilla, p, epochs, seed + 10_000)
            placebo = fit(copy.deepcopy(clean), benchmark.placebo, p, epochs, seed + 10_000)
            conta_original = correct(contaminated, vanilla)
            for name, data in benchmark.updated.items():
                vectors = {"clean_original": clean_vectors[VANILLA], "clean_updated": clean_vectors[name],
                           "conta_original": conta_original, "conta_updated": correct(contaminated, data),
                           "placebo_updated": correct(placebo, data), "random_original": random_vectors[VANILLA],
                           "random_updated": random_vectors[name]}
                for family in ("all", *FAMILIES):
                    rows.append({"seed": seed, "recipe": recipe, "strategy": name, "family": family,
                                 **score(vectors, data.family == family if family != "all" else slice(None))})
    return rows


def score(v: dict[str, np.ndarray], rows: np.ndarray | slice) -> dict[str, float]:
    """The paper's two metrics and the aggregate ones it criticises, on the items ``rows``."""
    acc = {name: float(vector[rows].mean()) for name, vector in v.items()}
    return {"fidelity": fidelity(v["clean_original"][rows], v["clean_updated"][rows]),
            "resistance": resistance(v["clean_updated"][rows], v["conta_updated"][rows]),
            "placebo_resistance": resistance(v["clean_updated"][rows], v["placebo_updated"][rows]),
            "random_fidelity": fidelity(v["random_original"][rows], v["random_updated"][rows]),
            **{f"acc_{name}": value for name, value in acc.items() if not name.startswith("random")},
            # accuracy drop: the contaminated model on the original minus on the updated benchmark;
            # accuracy matching: the contaminated model on the updated vs the clean model on the original
            "accuracy_drop": acc["conta_original"] - acc["conta_updated"],
            "accuracy_gap_to_clean": acc["conta_updated"] - acc["clean_original"]}
