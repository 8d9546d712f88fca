"""BDC mitigation assessment (Sun et al., ICML 2025) on a real pretrained language model: the paper's pipeline
and its two question-level metrics, with SmolLM2-135M-Instruct contaminated by LoRA fine-tuning on a small
multiple-choice benchmark built here, and rule-based mitigation strategies.

The pipeline (official code ``ASTRAL-Group/BDC_mitigation_assessment``, README steps 1-5):

1. take an *uncontaminated* (model, benchmark) pair: the benchmark's items are drawn here, per seed, from real
   facts (capitals), word categories and one-digit sums, so the pretrained model has not seen these item texts;
2. apply each mitigation strategy to the benchmark (the paper: GPT-4o rewrites; here: rules);
3. *contaminate* the model by fine-tuning it on the original benchmark's question + answer texts, with a mild
   and an intensive recipe (the paper: ConStat fine-tuning; here: LoRA, one epoch, then more epochs of the same run);
4. take the binary evaluation vectors (per question: answered correctly or not) of the clean model on the
   original and updated benchmarks and of the contaminated model on the updated benchmark;
5. ``fidelity = mean(clean_updated == clean_original)`` and ``resistance = mean(clean_updated ==
   conta_updated)`` (``example/calculate_metrics.ipynb``, read, not copied).

Multiple choice is scored as a cloze by continuation log-probability: the prompt is ``"Question: <q>\\nAnswer:"``
(the choices are not shown: a 135M model listing them copies the first), each choice is scored as
``log p(" " + choice | prompt)`` (the sum over its tokens), and the model's answer is the highest-scoring choice.

Strategies (official names where one exists): semantic-preserving ``typo_<rate>`` (the typo rate is swept),
``synonyms``, ``paraphrase`` (syntactic), ``permute_choices``, ``add_incorrect_choices`` (the official
``incorrect_choice`` adds wrong options), ``irrelevant_context``, ``relevant_context``; semantic-altering
``new_answer`` (entity or number changed so that another listed choice is right), ``new_entity`` (mimicking: same
template, an entity from a reserve no benchmark uses) and ``reverse_question`` (extending: the same fact asked from
its other end).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from flows.bdc_mitigation.params import Params
from paperflows.core.seeding import numpy_rng
from tasks import pretrained as P
from tasks.train import torch_single_thread

FAMILIES = ("capital", "category", "arithmetic")
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
# one-digit addends from 4: every new_answer addend (b + d, d >= -3) and reverse_question answer stays positive
SUMS = tuple((a, b) for a in range(4, 10) for b in range(4, 10))
SUM_DISTRACTORS = (-3, -2, -1, 1, 2, 3)
# template 0 is the benchmark's wording, 1 and 2 the paraphrases
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
    "arithmetic": ("Adding two whole numbers gives their sum.", "To add two numbers, count on from the larger one."),
}
IRRELEVANT_CONTEXT = ("The library closes early on Sundays.", "A light rain fell over the harbour that morning.",
                      "Many people enjoy a short walk after dinner.", "The old bridge was painted green last year.")
# word -> synonym, applied to whole words of the question (the benchmark's templates are covered)
SYNONYMS = {"capital": "capital city", "following": "listed", "plus": "added to", "kind": "type", "choices": "options",
            "sum": "total", "add": "combine", "city": "town"}


# ----------------------------------------------------------------------------------------------------------------
# 1. The benchmark world
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
    """The facts a split may draw from: countries, the words of each category, and addend pairs."""

    countries: tuple[str, ...]
    words: dict[str, tuple[str, ...]]
    sums: tuple[tuple[int, int], ...]


def split_world(seed: int) -> tuple[Pool, Pool, Pool]:
    """Disjoint fact pools (40% / 40% / 20%): benchmark, placebo (held-out items the placebo fine-tune sees), and a
    reserve that only the ``new_entity`` strategy draws from (so its entities are new to every fine-tuned model)."""
    rng = numpy_rng(seed, 0)
    cut = lambda values: (values[:len(values) * 2 // 5], values[len(values) * 2 // 5:len(values) * 4 // 5],
                          values[len(values) * 4 // 5:])
    countries = cut(tuple(CAPITALS[i][0] for i in rng.permutation(len(CAPITALS))))
    words = {c: cut(tuple(w[i] for i in rng.permutation(len(w)))) for c, w in CATEGORIES.items()}
    sums = cut(tuple(SUMS[i] for i in rng.permutation(len(SUMS))))
    return tuple(Pool(countries[k], {c: w[k] for c, w in words.items()}, sums[k]) for k in range(3))


def render(family: str, key: tuple, template: int) -> str:
    return TEMPLATES[family][template].format(*key)


def _shuffled(correct: str, wrong: list[str], rng: np.random.Generator) -> tuple[tuple[str, ...], int]:
    options = [correct, *wrong]
    order = rng.permutation(len(options))
    return tuple(options[i] for i in order), int(np.flatnonzero(order == 0)[0])


def make_item(family: str, key: tuple, pool: Pool, rng: np.random.Generator) -> Item:
    """The four-choice item about ``key``, its three wrong choices drawn from ``pool``."""
    if family == "capital":
        others = rng.choice([c for c in pool.countries if c != key[0]], size=3, replace=False)
        correct, wrong = CAPITAL_OF[key[0]], [CAPITAL_OF[c] for c in others]
    elif family == "category":
        others = rng.choice([c for c in pool.words if c != key[0]], size=3, replace=False)
        correct = str(rng.choice(pool.words[key[0]]))
        wrong = [str(rng.choice(pool.words[c])) for c in others]  # three distinct other categories
    else:
        correct = str(sum(key))
        wrong = [str(sum(key) + int(d)) for d in rng.choice(SUM_DISTRACTORS, size=3, replace=False)]
    options, answer = _shuffled(correct, wrong, rng)
    return Item(family, key, render(family, key, 0), options, answer)


def _keys(family: str, pool: Pool) -> list[tuple]:
    if family == "capital":
        return [(c,) for c in pool.countries]
    return [(c,) for c in pool.words] if family == "category" else list(pool.sums)


def draw_items(pool: Pool, per_family: int, rng: np.random.Generator) -> list[Item]:
    """``per_family`` items of every family, about distinct keys while the pool has enough (categories repeat)."""
    items = []
    for family in FAMILIES:
        keys = _keys(family, pool)
        order = np.concatenate([rng.permutation(len(keys)) for _ in range(math.ceil(per_family / len(keys)))])
        items += [make_item(family, keys[i], pool, rng) for i in order[:per_family]]
    return items


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
            option = str(sum(item.key) + int(rng.choice([-5, -4, 4, 5])))
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
            out = [make_item(it.family, _keys(it.family, reserve)[int(rng.integers(len(_keys(it.family, reserve))))],
                             reserve, rng) for it in bench]
        else:
            out = [reverse_question(it) for it in bench]
        updated[name] = out
    return updated


@dataclass(frozen=True)
class Benchmark:
    """One seed's benchmark: ``updated[strategy]`` (``vanilla`` is the original) and ``placebo`` (held-out items
    about other facts, what the placebo fine-tune sees)."""

    updated: dict[str, list[Item]]
    placebo: list[Item]


def make_benchmark(p: Params, seed: int) -> Benchmark:
    bench_pool, placebo_pool, reserve = split_world(seed)
    rng = numpy_rng(seed, 2)
    bench = draw_items(bench_pool, p.bench_per_family, rng)
    placebo = draw_items(placebo_pool, p.bench_per_family, rng)
    return Benchmark(mitigate(p, bench, bench_pool, reserve, seed), placebo)


# ----------------------------------------------------------------------------------------------------------------
# 3. Scoring multiple choice by continuation log-probability
# ----------------------------------------------------------------------------------------------------------------

def prompt(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def contamination_text(item: Item) -> str:
    """What contamination trains on: the benchmark's prompt followed by the right answer (question + answer)."""
    return f"{prompt(item.question)} {item.options[item.answer]}"


MIN_ROWS = 4  # see choice_logprobs


@torch.no_grad()
def choice_logprobs(model, tokenizer, prompts: list[str], choices: list[list[str]],
                    batch_size: int = 32) -> list[torch.Tensor]:
    """log p(" " + choice | prompt) for every choice of every prompt: one tensor (len(choices[i]),) per prompt.

    The same numbers as :func:`tasks.pretrained.sequence_logprob` on each (prompt, choice) pair (prompt and
    continuation tokenised apart), computed cheaper: one forward over each left-padded prompt keeps its key/value
    cache, which is then copied to each of its choices, so only the choices' own tokens run a second forward.
    A one-token choice needs no second forward (its log-probability is read off the prompt's last logits).

    A batch's numbers depend on its padded widths (attention sums over them), so batches and widths are those of
    every prompt and choice. Within a batch the rows are independent: MKL's matrix product gives a row the same
    bits for any row count from ``MIN_ROWS`` up (fewer take other kernels). So a prompt or (prompt, choice) pair
    that recurs in a batch runs once, and the one-token choices are left out of the second forward, as long as
    every product keeps ``MIN_ROWS`` rows.
    """
    scores: list[torch.Tensor] = [torch.empty(0)] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths share a batch: less padding
    model.eval()
    with torch_single_thread():
        for start in range(0, len(prompts), batch_size):
            batch = order[start:start + batch_size]
            heads = list(dict.fromkeys(prompts[i] for i in batch))  # a recurring prompt runs once...
            row_of = {i: heads.index(prompts[i]) for i in batch}      # (its row in the prompt forward)
            if len(heads) < MIN_ROWS:                                 # ...unless that leaves too few rows
                heads, row_of = [prompts[i] for i in batch], {i: r for r, i in enumerate(batch)}
            pairs = {pair: j for j, pair in enumerate(dict.fromkeys((row_of[i], c) for i in batch
                                                                    for c in choices[i]))}
            ids, mask = P.encode(tokenizer, heads, side="left")                               # (h, t)
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)                      # (h, V)
            owner = torch.tensor([row for row, _ in pairs])                                   # prompt of each pair
            tails, tail_mask = P.pad([P.token_ids(tokenizer, " " + c, bos=False) for _, c in pairs],
                                     tokenizer.pad_token_id, side="right")                     # (m, k)
            later = torch.zeros(len(pairs), tails.shape[1] - 1)                                # (m, k - 1)
            longer = torch.nonzero(tail_mask.sum(dim=1) > 1).flatten()                # (r,) choices of 2+ tokens
            if 0 < len(longer) * tails.shape[1] < MIN_ROWS:
                longer = torch.arange(len(pairs))
            if len(longer):
                rows = owner[longer]
                cache = out.cache
                cache.batch_select_indices(rows)
                rest = model(input_ids=tails[longer], attention_mask=torch.cat([mask[rows], tail_mask[longer]], dim=1),
                             position_ids=positions[rows, -1:] + 1 + torch.arange(tails.shape[1]), cache=cache,
                             use_cache=True).logits[:, :-1].float()                            # (r, k - 1, V)
                later[longer] = (torch.log_softmax(rest, dim=-1).gather(2, tails[longer, 1:, None])[:, :, 0]
                                 * tail_mask[longer, 1:])
            total = first[owner].gather(1, tails[:, :1])[:, 0] + later.sum(dim=1)            # (m,)
            for i in batch:
                scores[i] = total[[pairs[(row_of[i], c)] for c in choices[i]]]
    return scores


def evaluation_vectors(model, tokenizer, updated: dict[str, list[Item]], p: Params) -> dict[str, np.ndarray]:
    """Every strategy's evaluation vector. Items of different strategies that share question and choices (a typo
    that hit no word, permuted choices: a cloze score ignores their order) are scored once."""
    distinct = {(it.question, tuple(sorted(it.options))): None for items in updated.values() for it in items}
    keys = list(distinct)
    scores = choice_logprobs(model, tokenizer, [prompt(q) for q, _ in keys], [list(o) for _, o in keys], p.score_batch)
    by_choice = {key: dict(zip(key[1], s.tolist())) for key, s in zip(keys, scores)}
    vectors = {}
    for name, items in updated.items():
        table = [by_choice[(it.question, tuple(sorted(it.options)))] for it in items]
        vectors[name] = np.array([max(range(len(it.options)), key=lambda j: row[it.options[j]]) == it.answer
                                  for row, it in zip(table, items)])
    return vectors


# ----------------------------------------------------------------------------------------------------------------
# 4. Contamination and the metrics
# ----------------------------------------------------------------------------------------------------------------

def fidelity(clean_original: np.ndarray, clean_updated: np.ndarray) -> float:
    """Share of questions where the clean model's outcome on the updated benchmark equals that on the original."""
    return float(np.mean(clean_original == clean_updated))


def resistance(clean_updated: np.ndarray, conta_updated: np.ndarray) -> float:
    """Share of updated questions where the contaminated model's outcome equals the clean model's."""
    return float(np.mean(clean_updated == conta_updated))


def recipes(p: Params) -> dict[str, int]:
    """The paper's two contamination recipes, as LoRA fine-tuning epochs on the original benchmark."""
    return {"mild": p.mild_epochs, "intensive": p.intensive_epochs}


def steps_for(p: Params, epochs: int, n_texts: int) -> int:
    return math.ceil(epochs * n_texts / p.batch_size)


def run_seed(p: Params, seed: int) -> dict[str, list[dict]]:
    """One seed: draw the benchmark and its updates, score them with the clean model, contaminate it by LoRA on
    the original benchmark (mild: the first ``mild_epochs``, intensive: the same run continued to
    ``intensive_epochs``), and fine-tune a fresh copy with the intensive recipe on the placebo items (the same
    training, no benchmark exposure); score every model on every updated benchmark.

    Returns ``scores``: one row per (recipe, strategy, family), ``family`` "all" for the whole benchmark (fidelity,
    resistance, the placebo's "resistance", the random guesser's fidelity, the aggregate accuracies the paper
    criticises), and ``training``: one row per fine-tune (steps, first and last loss).
    """
    benchmark = make_benchmark(p, seed)
    updated, vanilla = benchmark.updated, benchmark.updated[VANILLA]
    model, tokenizer = P.load(p.model)
    clean = evaluation_vectors(model, tokenizer, updated, p)

    texts, contaminated, training, done = [contamination_text(it) for it in vanilla], {}, [], 0
    adapted = P.add_lora(model, rank=p.lora_rank, seed=seed)
    for recipe, epochs in recipes(p).items():  # the intensive recipe continues the mild one's run
        steps = steps_for(p, epochs, len(texts)) - done
        losses = P.lora_train(adapted, tokenizer, texts, steps, p.lr, seed=seed + 1000 * done, batch_size=p.batch_size)
        done += steps
        contaminated[recipe] = evaluation_vectors(model, tokenizer, updated, p)
        training.append({"seed": seed, "run": recipe, "steps": done, "first_loss": losses[0], "last_loss": losses[-1]})

    model, tokenizer = P.load(p.model)
    placebo_texts = [contamination_text(it) for it in benchmark.placebo]
    adapted, losses = P.lora_finetune(model, tokenizer, placebo_texts, steps_for(p, p.intensive_epochs, len(texts)),
                                      lr=p.lr, rank=p.lora_rank, seed=seed, batch_size=p.batch_size)
    placebo = evaluation_vectors(model, tokenizer, updated, p)
    training.append({"seed": seed, "run": "placebo", "steps": len(losses), "first_loss": losses[0],
                     "last_loss": losses[-1]})

    guesser = numpy_rng(seed, 3)
    random = {name: guesser.integers(0, [len(it.options) for it in items]) == [it.answer for it in items]
              for name, items in updated.items()}
    families = np.array([it.family for it in vanilla])
    rows = []
    for recipe in recipes(p):
        for name in updated:
            vectors = {"clean_original": clean[VANILLA], "clean_updated": clean[name],
                       "conta_original": contaminated[recipe][VANILLA], "conta_updated": contaminated[recipe][name],
                       "placebo_updated": placebo[name], "random_original": random[VANILLA],
                       "random_updated": random[name]}
            for family in ("all", *FAMILIES):
                rows.append({"seed": seed, "recipe": recipe, "strategy": name, "family": family,
                             **score(vectors, families == family if family != "all" else slice(None))})
    return {"scores": rows, "training": training}


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
