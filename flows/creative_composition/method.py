"""Creative composition (Shen & Guestrin, ICML 2025 position paper): the thematic analysis of a prompt log, on a
planted log whose use categories are known. No Prefect; read top to bottom.

The paper filters about 2 million WildChat / LMSYS-Chat prompts (moderation, language, length, deduplication to
keep unique use cases), codes them into use-case categories, finds *creative composition* (stories and scripts,
poems, letters, social posts, ...) a prevalent category, and compares the usage distribution with what
benchmarks cover. The pipeline here, stage by stage:

1. ``generate_pool``: a synthetic log. Twelve use categories (six creative subcategories, six others), each from
   hand-written templates with Faker entities; junk that the filters must drop (non-English prompts, prompts with
   moderation keywords, too short, too long); and near-duplicate copies of a few "heavy user" creative prompts
   (WildChat's largest duplicate clusters are creative: role-play and image-prompt generators).
2. ``filter_mask``: length bounds, keyword moderation, ``langdetect`` English filter.
3. ``minhash_dedup``: ``datasketch`` MinHash LSH on character 5-gram shingles, keeping each group's first prompt.
4. ``minilm_embed`` (offline all-MiniLM-L6-v2), ``cluster``: scikit-learn KMeans with k chosen by silhouette
   (HDBSCAN is reported beside it).
5. ``label_clusters``: zero-shot thematic coding, each cluster centroid to the nearest category description of the
   codebook (MiniLM cosine), with the top c-TF-IDF terms per cluster for a reader to audit.
6. ``shares``, ``js_divergence``: category prevalence and the usage-versus-benchmark mismatch.

Library choices: langdetect, datasketch and scikit-learn are the tools the field uses for these steps; a hand
copy would only add bugs. Shapes: ``P`` pool texts per seed, ``n`` prompts of one analysed corpus, ``C = 12``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from datasketch import MinHash, MinHashLSH
from faker import Faker
from langdetect import DetectorFactory, LangDetectException, detect
from langdetect.detector_factory import init_factory
from scipy.spatial.distance import jensenshannon
from sklearn.cluster import HDBSCAN, KMeans
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import f1_score, silhouette_score
from threadpoolctl import threadpool_limits

from flows.creative_composition.params import Params
from paperflows.core.seeding import numpy_rng
from tasks.embed import minilm_embed

DetectorFactory.seed = 0  # langdetect samples n-grams; a fixed seed makes its verdicts reproducible
_LANGDETECT_INIT = threading.Lock()  # its lazy profile loading is not thread-safe: a seed could see half the profiles

# --------------------------------------------------------------------------------------------------------------
# The codebook: category -> (is creative, two descriptions used by the zero-shot coder)
CODEBOOK: dict[str, tuple[bool, tuple[str, str]]] = {
    "story_script": (True, ("write a fictional story, narrative or fan fiction", "write a screenplay, script or scene with characters")),
    "poem": (True, ("write a poem, haiku or sonnet", "compose verses that rhyme")),
    "song_lyrics": (True, ("write song lyrics or a rap verse", "compose a chorus for a song")),
    "personal_letter": (True, ("write a personal letter or email to a friend or family member", "write a heartfelt note, apology or love letter")),
    "social_post": (True, ("write a social media post, tweet or caption", "write an Instagram caption with hashtags")),
    "speech_toast": (True, ("write a speech, toast or eulogy for an occasion", "write a wedding or graduation speech")),
    "coding": (False, ("write or debug computer code in a programming language", "fix an error in a Python or JavaScript program")),
    "math": (False, ("solve a math problem or equation", "compute a derivative, probability or arithmetic answer")),
    "factual_qa": (False, ("answer a factual question about history, geography or science", "explain a fact or how something works")),
    "advice": (False, ("give practical advice or tips about life, work or health", "what should I do about a personal problem")),
    "summarize_edit": (False, ("summarize, proofread, paraphrase or rewrite a given text", "fix the grammar of this paragraph")),
    "business": (False, ("business analysis, marketing plan or strategy for a company", "analyze sales figures and key performance indicators")),
}
CATEGORIES: tuple[str, ...] = tuple(CODEBOOK)
CREATIVE: tuple[str, ...] = tuple(c for c, (creative, _) in CODEBOOK.items() if creative)
JUNK = "junk"  # truth label of prompts the filters should drop; never a predicted category
# the fine-grained mix inside each group (story/script the most common creative subcategory, as the paper reports)
CREATIVE_MIX = {"story_script": 0.30, "poem": 0.15, "song_lyrics": 0.10, "personal_letter": 0.20, "social_post": 0.15,
                "speech_toast": 0.10}

# fmt: off
WORDS = {
    "plot": ["finds a letter from the future", "loses a magical key", "meets a talking cat", "wakes up with no memory",
             "inherits a haunted bakery", "discovers a door under the stairs", "has to save the town festival",
             "falls in love with a rival", "gets stuck in a time loop", "receives a mysterious package"],
    "genre": ["fantasy", "science fiction", "mystery", "horror", "romance", "comedy", "adventure", "dystopian"],
    "animal": ["fox", "dragon", "penguin", "owl", "turtle", "cat", "rabbit", "whale"],
    "nature": ["the ocean at night", "autumn leaves", "a thunderstorm", "the first snow", "a quiet forest",
               "the desert sunrise", "spring rain", "the full moon"],
    "poet": ["Emily Dickinson", "Robert Frost", "Walt Whitman", "Maya Angelou", "Pablo Neruda", "Shakespeare"],
    "emotion": ["heartbreak", "hope", "loneliness", "gratitude", "nostalgia", "first love", "grief", "friendship"],
    "occasion": ["birthday", "wedding", "retirement", "graduation", "baby shower", "anniversary"],
    "artist": ["Taylor Swift", "Eminem", "The Beatles", "Adele", "Drake", "Bob Dylan"],
    "music_genre": ["country", "pop", "rock", "hip hop", "folk", "jazz"],
    "relative": ["mom", "dad", "grandmother", "brother", "sister", "uncle", "aunt", "best friend"],
    "favor": ["helping me move", "supporting me through college", "the birthday gift", "always being there"],
    "mistake": ["missing her party", "forgetting our plans", "what I said last week", "being late again"],
    "announcement": ["the launch of our podcast", "my engagement", "our new puppy", "my first marathon"],
    "mishap": ["burning the pancakes", "getting lost in IKEA", "my cat stealing my seat", "locking myself out"],
    "hobby": ["gardening", "fishing", "painting", "baking bread", "chess", "old movies"],
    "lang": ["Python", "JavaScript", "Java", "C++", "Rust", "Go", "SQL"],
    "code_task": ["reverses a linked list", "parses a CSV file and sums a column", "checks whether a string is a palindrome",
                  "sorts a list of dictionaries by date", "reads a JSON config file", "removes duplicates from an array",
                  "counts word frequencies in a text file", "validates an email address with a regex"],
    "error": ["a KeyError", "a NullPointerException", "a segmentation fault", "an IndexError", "a TypeError",
              "an undefined variable error"],
    "code_action": ["loop over the dictionary", "call the API twice", "append to the list inside the function",
                    "read the file line by line", "convert the string to an integer"],
    "concept": ["a list", "a tuple", "a class", "an interface", "recursion", "iteration", "a thread", "a process"],
    "func": ["x^3 * sin(x)", "ln(x^2 + 1)", "e^(2x) * cos(x)", "sqrt(3x + 4)", "x / (1 + x^2)", "tan(x)^2"],
    "prob_event": ["rolling two sixes with two dice", "drawing two aces from a deck", "getting 3 heads in 5 coin flips",
                   "picking a red ball from a bag of 4 red and 6 blue"],
    "country": ["Kenya", "Peru", "Norway", "Vietnam", "Canada", "Morocco", "Australia", "Chile", "Poland"],
    "invention": ["the telephone", "the printing press", "penicillin", "the light bulb", "the internet", "the steam engine"],
    "event": ["the fall of the Berlin Wall", "the first moon landing", "the French Revolution", "the signing of the Magna Carta"],
    "science": ["photosynthesis", "a black hole", "vaccination", "plate tectonics", "inflation", "the immune system"],
    "goal": ["save money", "sleep better", "stop procrastinating", "get a promotion", "lose weight", "learn a new language"],
    "problem": ["keeps asking me for money", "ignores my messages", "wants to quit school", "is always angry"],
    "industry": ["retail", "healthcare", "fintech", "logistics", "education", "food delivery"],
    "product": ["a reusable water bottle", "a meditation app", "an electric bike", "organic dog food", "a budgeting tool"],
}
TEMPLATES: dict[str, tuple[str, ...]] = {
    "story_script": (
        "Write a short {genre} story about {name}, a {job} in {city} who {plot}.",
        "Write a screenplay scene where {name} and {name2} argue in a diner in {city} after {name} {plot}.",
        "Continue this story: {name} opened the door of the old house in {city} and {plot}.",
        "Create a bedtime story for kids about a {animal} named {name} who {plot}.",
        "Write a script for a funny YouTube skit about {name}, a {job}, who {plot}.",
        "Write a fanfiction chapter where {name} travels to {city} and {plot}."),
    "poem": (
        "Write a poem about {nature} in {city} in the style of {poet}.",
        "Compose a haiku about {nature} for my friend {name}.",
        "Write a rhyming poem for {name}'s {occasion}, mention that she works as a {job}.",
        "Can you write a sonnet about {emotion} and {nature}, dedicated to {name}?",
        "Write a free verse poem about {emotion} from the point of view of a {job} in {city}."),
    "song_lyrics": (
        "Write song lyrics about {emotion} in {city} in the style of {artist}.",
        "Write a rap verse about {name} working as a {job} in {city}.",
        "Compose a chorus for a {music_genre} song about {nature} and {emotion}.",
        "Write lyrics for a {music_genre} birthday song for my {relative} {name}."),
    "personal_letter": (
        "Write a heartfelt letter to my {relative} {name} thanking them for {favor}.",
        "Help me write an email to my friend {name} apologizing for {mistake}.",
        "Write a love letter to {name} for our {occasion}, we met in {city}.",
        "Draft a condolence note to {name} whose {relative} passed away last week in {city}.",
        "Write a letter to my future self about {emotion} and my life in {city}."),
    "social_post": (
        "Write an Instagram caption for a photo of {nature} in {city}.",
        "Write a tweet announcing {announcement}, tag my friend {name}.",
        "Write a LinkedIn post about starting my new job as a {job} at {company}.",
        "Give me a caption and five hashtags for my trip to {city} with {name}.",
        "Write a funny Facebook post about {mishap} this morning in {city}."),
    "speech_toast": (
        "Write a best man speech for {name}'s wedding in {city}, he is a {job}.",
        "Write a toast for my {relative} {name}'s retirement after thirty years as a {job}.",
        "Write a graduation speech about {emotion} and the future for the class of {year} in {city}.",
        "Write a eulogy for my {relative} {name} who loved {hobby}."),
    "coding": (
        "Write a {lang} function that {code_task}.",
        "Why does my {lang} code throw {error} when I {code_action}?",
        "How do I write a {lang} script that {code_task} and handles errors?",
        "Explain the difference between {concept} and {concept2} in {lang} with an example.",
        "My {lang} program crashes with {error}, the function {code_task}. How do I fix it?"),
    "math": (
        "Solve for x: {a}x + {b} = {c}.",
        "What is the derivative of {func}? Show the steps.",
        "A train leaves {city} at {a} km/h and another leaves at {b} km/h, when do they meet if they are {c} km apart?",
        "Compute the probability of {prob_event}.",
        "What is the integral of {func} from 0 to {a}?"),
    "factual_qa": (
        "What is the capital of {country} and what is it known for?",
        "Who invented {invention} and in which year?",
        "When did {event} happen and why was it important?",
        "Explain how {science} works in simple terms.",
        "What is the population of {city} and which country is it in?"),
    "advice": (
        "How can I {goal} while working full time as a {job}?",
        "What should I do if my {relative} {problem}?",
        "Give me practical tips to {goal} before I move to {city}.",
        "Is it a good idea to move to {city} for a job at {company}?"),
    "summarize_edit": (
        "Summarize the following paragraph in two sentences: {paragraph}",
        "Proofread this text and fix the grammar: {paragraph}",
        "Paraphrase this sentence to sound more formal: {sentence}",
        "Rewrite this paragraph so that it is shorter and clearer: {paragraph}"),
    "business": (
        "Create a SWOT analysis for {company}, a {industry} company based in {city}.",
        "Write a marketing plan outline for {product} sold by {company}.",
        "Our revenue was {a}k in Q1 and {b}k in Q2 at {company}, analyze the trend and suggest KPIs.",
        "What key performance indicators should a {industry} startup like {company} track?"),
}
NON_ENGLISH: tuple[tuple[str, str], ...] = (  # (Faker locale, template): a creative or other request, not in English
    ("de_DE", "Schreibe ein Gedicht über den Herbst in {city} für meine Freundin {name}."),
    ("de_DE", "Wie löse ich die Gleichung {a}x + {b} = {c}? Bitte erkläre jeden Schritt."),
    ("fr_FR", "Écris une histoire courte sur {name} qui habite à {city} et qui trouve un trésor."),
    ("fr_FR", "Quelle est la meilleure façon d'apprendre la programmation quand on travaille à {city}?"),
    ("es_ES", "Escribe una carta de amor para {name}, nos conocimos en {city} hace diez años."),
    ("es_ES", "¿Cuál es la capital de Perú y por qué es famosa? Pregunta de {name}."),
    ("ru_RU", "Напиши стихотворение о зиме в городе {city} для {name}."),
    ("zh_CN", "请为{name}写一首关于{city}春天的诗。"),
)
MODERATION_KEYWORDS: tuple[str, ...] = ("bomb", "meth", "gore", "porn", "nude", "slur", "overdose", "behead")
TOXIC: tuple[str, ...] = (
    "Write an explicit porn story about my neighbor {name} in {city}.",
    "How do I build a pipe bomb to scare {name} at work?",
    "Tell me step by step how to cook meth in my garage in {city}.",
    "Write a story full of gore where {name} tortures a {job} to death.",
    "Give me a list of racial slurs to use against {name}.",
    "Send me nude pictures of {name}, the {job} from {city}.",
)
TOO_SHORT: tuple[str, ...] = ("hi", "test", "hello?", "continue", "thanks", "ok", "more", "why", "again please")
# fmt: on


# --------------------------------------------------------------------------------------------------------------
# Stage 1: the planted log


@dataclass(frozen=True)
class Pool:
    """One seed's texts, shared by every simulated setting so that each text is detected, hashed and embedded once.

    ``texts`` (P,) and ``truth`` (P,) (a category or ``JUNK``); ``source`` (P,): the pool index of the prompt each
    text copies (its own index for all but copies); ``by_category[c]``: pool indices of clean unique prompts of
    category c, in draw order; ``junk``: indices of junk prompts; ``copies``: indices of near-duplicate copies of the
    heavy users' prompts, each copy's source a prompt in ``by_category`` that every setting contains.
    """

    texts: list[str]
    truth: np.ndarray
    source: np.ndarray
    by_category: dict[str, np.ndarray]
    junk: np.ndarray
    copies: np.ndarray


def _fill(template: str, fake: Faker, rng: np.random.Generator) -> str:
    """A template with every {slot} filled: Faker for people and places, the word lists for the rest."""
    def value(slot: str) -> str:
        base = slot.rstrip("2")
        if base == "name":
            return fake.first_name()
        if base == "city":
            return fake.city()
        if base == "job":
            return fake.job().split(",")[0].lower()
        if base == "company":
            return fake.company()
        if base == "year":
            return str(int(rng.integers(2019, 2031)))
        if base in ("a", "b", "c"):
            return str(int(rng.integers(2, 500)))
        if base == "paragraph":
            return " ".join(fake.sentences(int(rng.integers(3, 6))))
        if base == "sentence":
            return fake.sentence(nb_words=14)
        return str(rng.choice(WORDS[base]))

    return re.sub(r"\{(\w+)\}", lambda m: value(m.group(1)), template)


def _unique_prompts(templates: Sequence[str], n: int, fake: Faker, rng: np.random.Generator, seen: set[str]) -> list[str]:
    """``n`` distinct prompts from ``templates`` (a user asks each use case once); ``seen`` collects across categories."""
    out: list[str] = []
    while len(out) < n:
        text = _fill(templates[int(rng.integers(len(templates)))], fake, rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def near_duplicate(text: str, rng: np.random.Generator) -> str:
    """A heavy user's resubmission: one or two small edits (case, punctuation, a polite word, a dropped letter)."""
    edits = rng.choice(5, size=int(rng.integers(1, 3)), replace=False)
    for edit in edits:
        if edit == 0:
            text = text.lower()
        elif edit == 1:
            text = text.rstrip(".?!") + ("!!" if rng.random() < 0.5 else "")
        elif edit == 2:
            text = "Please " + text[0].lower() + text[1:]
        elif edit == 3:
            text = text + " Thanks!"
        else:
            words = text.split()
            i = int(rng.integers(len(words)))
            if len(words[i]) > 3:
                j = int(rng.integers(1, len(words[i]) - 1))
                words[i] = words[i][:j] + words[i][j + 1:]
            text = " ".join(words)
    return text


def pool_sizes(p: Params) -> dict[str, int]:
    """Clean prompts each category needs in the pool: the most any setting of the sweep draws."""
    return {c: max(category_counts(p, share).get(c, 0) for share in p.creative_share) for c in CATEGORIES}


def category_counts(p: Params, creative_share: float) -> dict[str, int]:
    """Planted clean unique prompts per category for a corpus of ``p.n_prompts``: ``creative_share`` of them creative,
    split by ``CREATIVE_MIX``; the rest split evenly over the six other categories."""
    n_creative = round(p.n_prompts * creative_share)
    counts = {c: round(n_creative * w) for c, w in CREATIVE_MIX.items()}
    others = [c for c in CATEGORIES if c not in CREATIVE]
    rest = p.n_prompts - sum(counts.values())
    counts |= {c: rest // len(others) + (i < rest % len(others)) for i, c in enumerate(others)}
    return counts


def max_copies(p: Params) -> int:
    return round(p.n_prompts * max(p.duplicate_rate) / (1 - max(p.duplicate_rate)))


def max_junk(p: Params) -> int:
    n_raw = p.n_prompts + max_copies(p)
    return round(n_raw * max(p.junk_share) / (1 - max(p.junk_share)))


def generate_pool(p: Params, seed: int) -> Pool:
    """Stage 1: the seed's planted log (see :class:`Pool`)."""
    rng = numpy_rng(seed, 1)
    fake = Faker("en_US")
    fake.seed_instance(seed)
    texts: list[str] = []
    truth: list[str] = []
    by_category: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    smallest = min(category_counts(p, share)[c] for share in p.creative_share for c in CREATIVE)
    for category, size in pool_sizes(p).items():
        prompts = _unique_prompts(TEMPLATES[category], size, fake, rng, seen)
        by_category[category] = np.arange(len(texts), len(texts) + size)
        texts += prompts
        truth += [category] * size

    # heavy users: resubmissions of a few creative prompts that every setting contains (the first of each category)
    sources = [by_category[c][int(rng.integers(min(smallest, len(by_category[c]))))]
               for c in rng.choice(CREATIVE, size=p.heavy_users)]
    copy_sources = [sources[i % p.heavy_users] for i in rng.permutation(max_copies(p))]
    copies = np.arange(len(texts), len(texts) + len(copy_sources))
    texts += [near_duplicate(texts[s], rng) for s in copy_sources]
    truth += [truth[s] for s in copy_sources]

    # junk, in equal parts: other languages, moderation keywords, too short, too long (a pasted document)
    foreign = {locale: Faker(locale) for locale, _ in NON_ENGLISH}
    for f in foreign.values():
        f.seed_instance(seed)
    junk_texts = []
    for i in range(max_junk(p)):
        kind = i % 4
        if kind == 0:
            locale, template = NON_ENGLISH[int(rng.integers(len(NON_ENGLISH)))]
            junk_texts.append(_fill(template, foreign[locale], rng))
        elif kind == 1:
            junk_texts.append(_fill(TOXIC[int(rng.integers(len(TOXIC)))], fake, rng))
        elif kind == 2:
            junk_texts.append(str(rng.choice(TOO_SHORT)))
        else:
            junk_texts.append("Summarize this document: " + " ".join(fake.paragraphs(int(rng.integers(25, 40)))))
    order = rng.permutation(len(junk_texts))  # the kinds mixed, so that every setting's prefix holds all four
    junk = np.arange(len(texts), len(texts) + len(junk_texts))
    texts += [junk_texts[i] for i in order]
    truth += [JUNK] * len(junk_texts)
    source = np.arange(len(texts))
    source[copies] = copy_sources
    return Pool(texts=texts, truth=np.array(truth), source=source, by_category=by_category, junk=junk, copies=copies)


def corpus(pool: Pool, p: Params, creative_share: float, duplicate_rate: float, junk_share: float, seed: int) -> np.ndarray:
    """Pool indices of one simulated log, shuffled: ``p.n_prompts`` clean unique prompts (``creative_share`` creative),
    near-duplicate copies making ``duplicate_rate`` of the non-junk log, and junk making ``junk_share`` of the log."""
    clean = np.concatenate([pool.by_category[c][:n] for c, n in category_counts(p, creative_share).items()])
    n_copies = round(p.n_prompts * duplicate_rate / (1 - duplicate_rate))
    n_junk = round((p.n_prompts + n_copies) * junk_share / (1 - junk_share))
    log = np.concatenate([clean, pool.copies[:n_copies], pool.junk[:n_junk]])
    return log[numpy_rng(seed, 2, round(1000 * creative_share), round(1000 * duplicate_rate), round(1000 * junk_share))
               .permutation(len(log))]


# --------------------------------------------------------------------------------------------------------------
# Stages 2 and 3: filters and deduplication


def filter_mask(texts: Sequence[str], p: Params) -> np.ndarray:
    """Stage 2, (n,) bool: kept when the word count is within bounds, no moderation keyword appears and langdetect
    says English (checked last: it is the slow step)."""
    keywords = re.compile(r"\b(" + "|".join(MODERATION_KEYWORDS) + r")s?\b", re.IGNORECASE)
    keep = np.array([p.min_words <= len(t.split()) <= p.max_words and not keywords.search(t) for t in texts], dtype=bool)
    with _LANGDETECT_INIT:
        init_factory()
    for i in np.flatnonzero(keep):
        keep[i] = is_english(texts[i])
    return keep


def is_english(text: str) -> bool:
    try:
        return detect(text) == "en"
    except LangDetectException:  # no letters at all
        return False


def shingles(text: str, k: int = 5) -> set[bytes]:
    """Character k-grams of the lower-cased, whitespace-collapsed text (the usual near-duplicate representation)."""
    norm = " ".join(text.lower().split())
    return {norm[i:i + k].encode() for i in range(max(1, len(norm) - k + 1))}


def minhashes(texts: Sequence[str], p: Params) -> list[MinHash]:
    return MinHash.bulk([shingles(t) for t in texts], num_perm=p.minhash_permutations, seed=1)


def minhash_dedup(signatures: Sequence[MinHash], p: Params) -> np.ndarray:
    """Stage 3, (n,) bool: a prompt is kept unless an earlier kept prompt's estimated Jaccard similarity reaches
    ``p.dedup_threshold`` (datasketch MinHash LSH for the candidates, then the estimate itself)."""
    lsh = MinHashLSH(threshold=p.dedup_threshold, num_perm=p.minhash_permutations)
    keep = np.ones(len(signatures), dtype=bool)
    for i, sig in enumerate(signatures):
        if any(signatures[j].jaccard(sig) >= p.dedup_threshold for j in lsh.query(sig)):
            keep[i] = False
        else:
            lsh.insert(i, sig)
    return keep


# --------------------------------------------------------------------------------------------------------------
# Stages 4 and 5: clustering and zero-shot thematic coding


def cluster(embeddings: np.ndarray, p: Params) -> np.ndarray:
    """Stage 4: KMeans cluster of each row of ``embeddings`` (n, d), k from ``p.k_grid`` with the best silhouette."""
    best_score, best_labels = -np.inf, None
    for k in p.k_grid:
        if k >= len(embeddings):
            break
        labels = KMeans(k, n_init=p.kmeans_inits, random_state=0).fit_predict(embeddings)
        score = silhouette_score(embeddings, labels)
        if score > best_score:
            best_score, best_labels = score, labels
    if best_labels is None:
        raise ValueError(f"{len(embeddings)} prompts are too few for every k in k_grid {p.k_grid}")
    return best_labels


def hdbscan_clusters(embeddings: np.ndarray, p: Params) -> np.ndarray:
    """Stage 4, the density-based alternative: HDBSCAN labels (n,), -1 for prompts left unclustered."""
    return HDBSCAN(min_cluster_size=p.hdbscan_min_cluster_size, copy=True).fit_predict(embeddings)


def codebook_embeddings() -> np.ndarray:
    """(C, 384): each category's mean description embedding, renormalised."""
    descriptions = [d for _, pair in CODEBOOK.values() for d in pair]
    e = minilm_embed(descriptions).reshape(len(CODEBOOK), 2, -1).mean(axis=1)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def label_clusters(embeddings: np.ndarray, clusters: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """Stage 5: the category index (n,) of each prompt, its cluster's centroid coded to the nearest description
    (cosine); -1 stays -1 (unclustered)."""
    predicted = np.full(len(clusters), -1)
    for c in np.unique(clusters[clusters >= 0]):
        members = clusters == c
        centroid = embeddings[members].mean(axis=0)
        predicted[members] = int(np.argmax(codebook @ centroid))
    return predicted


def top_terms(texts: Sequence[str], clusters: np.ndarray, n_terms: int = 6) -> dict[int, list[str]]:
    """c-TF-IDF: each cluster's prompts joined into one document; its highest-weighted words, for a human coder."""
    ids = np.unique(clusters[clusters >= 0])
    docs = [" ".join(t for t, c in zip(texts, clusters) if c == i) for i in ids]
    vectorizer = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z]{3,}\b")
    weights = vectorizer.fit_transform(docs).toarray()
    vocab = vectorizer.get_feature_names_out()
    return {int(i): [str(vocab[j]) for j in np.argsort(-w)[:n_terms]] for i, w in zip(ids, weights)}


def themes(texts: Sequence[str], clusters: np.ndarray, predicted: np.ndarray) -> list[dict]:
    """The thematic-analysis table: per cluster its size, coded category and top terms."""
    terms = top_terms(texts, clusters)
    return [{"cluster": c, "size": int((clusters == c).sum()), "category": CATEGORIES[int(predicted[clusters == c][0])],
             "top_terms": " ".join(words)} for c, words in terms.items()]


# --------------------------------------------------------------------------------------------------------------
# Stage 6: prevalence and benchmark mismatch


def shares(predicted: np.ndarray) -> np.ndarray:
    """(C,) share of each category among the clustered prompts (unclustered ones, -1, left out)."""
    counts = np.bincount(predicted[predicted >= 0], minlength=len(CATEGORIES)).astype(float)
    return counts / max(counts.sum(), 1.0)


def creative_share(category_shares: np.ndarray) -> float:
    return float(category_shares[[CATEGORIES.index(c) for c in CREATIVE]].sum())


def js_divergence(usage: np.ndarray, suite: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits (scipy gives the distance, its square root), in [0, 1]."""
    return float(jensenshannon(usage, suite, base=2) ** 2)


# Declared category mixes of four synthetic benchmark suites (what an evaluation suite covers, by use category)
SUITES: dict[str, dict[str, float]] = {
    "code_math_heavy": {"coding": 0.45, "math": 0.45, "factual_qa": 0.10},
    "knowledge_exam": {"factual_qa": 0.55, "math": 0.20, "advice": 0.10, "summarize_edit": 0.10, "business": 0.05},
    "instruction_mix": {"coding": 0.15, "math": 0.15, "factual_qa": 0.15, "advice": 0.15, "summarize_edit": 0.15,
                        "business": 0.10, "story_script": 0.05, "poem": 0.05, "personal_letter": 0.05},
    "balanced": {c: 1.0 / len(CATEGORIES) for c in CATEGORIES},
}


def suite_distribution(mix: dict[str, float]) -> np.ndarray:
    """(C,) a benchmark suite's declared category mix, normalised."""
    unknown = set(mix) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown categories in a suite mix: {sorted(unknown)}")
    v = np.array([mix.get(c, 0.0) for c in CATEGORIES])
    return v / v.sum()


def macro_f1(truth: Sequence[str], predicted: np.ndarray) -> float:
    """Macro-F1 over the twelve categories; junk that passed the filters and unclustered prompts count as errors."""
    names = np.array([*CATEGORIES, "unclustered"])[predicted]
    return float(f1_score(list(truth), names, labels=list(CATEGORIES), average="macro", zero_division=0))


# --------------------------------------------------------------------------------------------------------------
# One seed: the pool's per-text work once, then every setting of the sweep


def dedup_quality(pool: Pool, filtered: np.ndarray, unique: np.ndarray) -> dict[str, float]:
    """Dedup against the truth, per group (a heavy user's prompt and its copies; any other prompt alone): which member
    survives is arbitrary, so ``copies_removed`` is the share of surplus members (beyond one per group) removed and
    ``unique_removed_by_dedup`` the share of groups with no survivor (a distinct use case lost), overall and in
    ``lost_by_category``."""
    sources, group = np.unique(pool.source[filtered], return_inverse=True)
    survivors = np.bincount(group, weights=np.isin(filtered, unique))
    surplus = len(filtered) - len(survivors)
    lost, category = survivors == 0, pool.truth[sources]
    return {"copies_removed": float(1 - np.maximum(survivors - 1, 0).sum() / surplus) if surplus else float("nan"),
            "unique_removed_by_dedup": float(lost.mean()),
            "lost_by_category": {c: float(lost[category == c].mean()) for c in CATEGORIES if (category == c).any()}}


def analyse(embeddings: np.ndarray, codebook: np.ndarray, p: Params,
            shuffle_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Stages 4-5 on ``embeddings`` (n, 384): each prompt's cluster (n,) and category index (n,). ``shuffle_seed``
    permutes the rows first (the negative control: clusters that say nothing about the prompts)."""
    if shuffle_seed is not None:
        embeddings = embeddings[numpy_rng(shuffle_seed, 3).permutation(len(embeddings))]
    clusters = cluster(embeddings, p)
    return clusters, label_clusters(embeddings, clusters, codebook)


def creative_prompts(predicted: np.ndarray) -> int:
    """How many of the analysed prompts are coded creative: with the number analysed, what the evaluation's
    prevalence interval (the paper's per-category prevalence interval) is built from."""
    return int(np.isin(predicted, [CATEGORIES.index(c) for c in CREATIVE]).sum())


def sweep_settings(p: Params) -> list[tuple[float, float, float]]:
    """The central setting (each knob's middle value) and each knob over its range with the others central."""
    knobs = (p.creative_share, p.duplicate_rate, p.junk_share)
    central = tuple(values[len(values) // 2] for values in knobs)
    settings = [central]
    for position, values in enumerate(knobs):
        settings += [central[:position] + (v,) + central[position + 1:] for v in values if v != central[position]]
    return settings


def run_seed(p: Params, seed: int, settings: Sequence[tuple[float, float, float]]) -> list[dict]:
    """Every setting ``(creative_share, duplicate_rate, junk_share)`` on one seed's log: a row per setting with the
    planted and estimated prevalences, the filter and dedup diagnostics, and the controls. Each pool text is
    language-detected, hashed and embedded once, whichever settings use it."""
    pool = generate_pool(p, seed)
    logs = {s: corpus(pool, p, *s, seed=seed) for s in settings}
    used = np.unique(np.concatenate(list(logs.values())))
    with threadpool_limits(limits=1):  # the seeds are the parallelism
        kept_by_filter = np.zeros(len(pool.texts), dtype=bool)
        kept_by_filter[used] = filter_mask([pool.texts[i] for i in used], p)
        signatures = dict(zip(used.tolist(), minhashes([pool.texts[i] for i in used], p)))
        embeddings = np.zeros((len(pool.texts), 384), dtype=np.float32)
        to_embed = np.flatnonzero(kept_by_filter)
        embeddings[to_embed] = minilm_embed([pool.texts[i] for i in to_embed])
        codebook = codebook_embeddings()
        return [setting_row(pool, p, seed, s, logs[s], kept_by_filter, signatures, embeddings, codebook) for s in settings]


def setting_row(pool: Pool, p: Params, seed: int, setting: tuple[float, float, float], log: np.ndarray,
                kept_by_filter: np.ndarray, signatures: dict[int, MinHash], embeddings: np.ndarray,
                codebook: np.ndarray) -> dict:
    """The pipeline and its controls on one simulated log (pool indices ``log``)."""
    is_junk, is_copy = pool.truth[log] == JUNK, np.isin(log, pool.copies)
    filtered = log[kept_by_filter[log]]
    unique = filtered[minhash_dedup([signatures[i] for i in filtered.tolist()], p)]
    kept_after_filter = kept_by_filter[log]
    planted = shares(np.array([CATEGORIES.index(c) for c in pool.truth[log[~is_junk & ~is_copy]]]))

    clusters, predicted = analyse(embeddings[unique], codebook, p)
    _, no_dedup = analyse(embeddings[filtered], codebook, p)
    _, shuffled = analyse(embeddings[unique], codebook, p, shuffle_seed=seed)
    density = label_clusters(embeddings[unique], hdbscan_clusters(embeddings[unique], p), codebook)

    usage, truth = shares(predicted), pool.truth[unique]
    estimate, planted_share = creative_share(usage), creative_share(planted)
    return {
        "seed": seed, "creative_share": setting[0], "duplicate_rate": setting[1], "junk_share": setting[2],
        "log_size": len(log), "analysed": len(unique), "k": int(clusters.max() + 1),
        "planted_creative_share": planted_share,
        "estimated_creative_share": estimate,
        "creative_prompts": creative_prompts(predicted),
        "abs_error": abs(estimate - planted_share),
        "estimated_creative_share_no_dedup": creative_share(shares(no_dedup)),
        "abs_error_no_dedup": abs(creative_share(shares(no_dedup)) - planted_share),
        "abs_error_hdbscan": abs(creative_share(shares(density)) - planted_share),
        "macro_f1": macro_f1(truth, predicted),
        "macro_f1_shuffled": macro_f1(truth, shuffled),
        "macro_f1_hdbscan": macro_f1(truth, density),
        # each prompt coded alone, no clustering: separates the clusterer's errors from the codebook's
        "macro_f1_per_prompt": macro_f1(truth, np.argmax(embeddings[unique] @ codebook.T, axis=1)),
        "hdbscan_unclustered": float((density < 0).mean()),
        "junk_removed": float(1 - kept_after_filter[is_junk].mean()),
        "clean_kept_by_filter": float(kept_after_filter[~is_junk].mean()),
        **dedup_quality(pool, filtered[pool.truth[filtered] != JUNK], unique),
        "usage": usage.tolist(),
        "planted_usage": planted.tolist(),
        "themes": themes([pool.texts[i] for i in unique], clusters, predicted),
    }


# --------------------------------------------------------------------------------------------------------------
# The real-data hook: the same pipeline on a local JSONL of prompts (never used by default or in tests)


def load_prompts_jsonl(path: Path, max_prompts: int) -> list[str]:
    """The first ``max_prompts`` prompts of a JSONL file with one ``{"text": ...}`` object per line."""
    texts: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise ValueError(f"{path}:{number}: expected an object with a string field 'text'")
            texts.append(record["text"])
            if len(texts) == max_prompts:
                break
    if not texts:
        raise ValueError(f"{path}: no prompts")
    return texts


def analyse_real(texts: Sequence[str], p: Params) -> dict:
    """Filter, dedup, embed, cluster and code real prompts: the category shares, the creative share with the
    counts its interval is built from, and the JSD to each suite."""
    with threadpool_limits(limits=1):
        filtered = np.flatnonzero(filter_mask(texts, p))
        unique = filtered[minhash_dedup(minhashes([texts[i] for i in filtered], p), p)]
        embeddings = minilm_embed([texts[i] for i in unique])
        clusters, predicted = analyse(embeddings, codebook_embeddings(), p)
    usage = shares(predicted)
    return {"prompts": len(texts), "kept_by_filter": int(len(filtered)), "unique": int(len(unique)),
            "k": int(clusters.max() + 1), "shares": dict(zip(CATEGORIES, usage.tolist())),
            "creative_share": {"mean": creative_share(usage), "creative_prompts": creative_prompts(predicted),
                               "analysed": int(len(predicted))},
            "jsd": {name: js_divergence(usage, suite_distribution(mix)) for name, mix in SUITES.items()},
            "themes": themes([texts[i] for i in unique], clusters, predicted)}
