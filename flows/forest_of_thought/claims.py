"""The claims of Forest of Thought, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from tasks.contract import Claim, Control, Paper, ci

SOURCE = "abstracts-000.txt #12; plan ../shared/papers/forest_of_thought.md (paper figures from its summaries)"
ACROSS = ("Metric: per seed, the smallest difference over the proposer temperatures swept (fixed before the run), "
          "so the verdict must hold over the whole sweep; each temperature's mean is listed per setting.")

PAPER = Paper(
    slug="forest_of_thought",
    title="Forest-of-Thought: Scaling Test-Time Compute for Enhancing LLM Reasoning",
    method="FoT (permuted tree seeding, ToT BFS trees, self-correction, sparse activation, CGED)",
    paper_class="C",
    source="abstracts-000.txt #12",
    official_code="https://github.com/iamhankai/Forest-of-Thought",
    claims=(
        Claim(
            id="fot4_beats_tot",
            text=("FoT integrates multiple reasoning trees to leverage collective decision-making; on Game of 24, FoT "
                  "with 4 trees solves 91.58% against ToT's 74.74%. Here: on the small-GPT stand-in, FoT with 4 "
                  "trees (with self-correction and sparse activation) solves at least 10 points more held-out "
                  "puzzles than ToT (one tree) with the same proposer, value model and correction."),
            source=SOURCE, metric="claims.fot_vs_tot.mean", comparison=">=", threshold=0.10, kind="magnitude",
            role="claim", interval=ci("claims.fot_vs_tot"), per_setting="claims.fot_vs_tot_by_temperature",
            scaled="the plan's +10 points (paper +16.8) as the magnitude; " + ACROSS,
            control=Control(name="a forest of 4 identical trees (same input order, same sampling seed) minus ToT",
                            metric="claims.identical_vs_tot.mean", interval=ci("claims.identical_vs_tot")),
        ),
        Claim(
            id="correction_helps_tot",
            text=("A dynamic self-correction strategy enables real-time error correction (paper: more than +50% for "
                  "ToT on Game of 24). Here: the official rule-based correction raises ToT's success by at least 10 "
                  "points on the small-GPT stand-in."),
            source=SOURCE, metric="claims.correction_gain.mean", comparison=">=", threshold=0.10, kind="magnitude",
            role="claim", interval=ci("claims.correction_gain"), per_setting="claims.correction_gain_by_temperature",
            scaled="the plan's +10 points as the magnitude; " + ACROSS,
            control=Control(name="the same correction on an error-free proposer (uniformly random legal moves)",
                            metric="claims.correction_gain_rules.mean", interval=ci("claims.correction_gain_rules")),
        ),
        Claim(
            id="cged_beats_random",
            text=("Consensus-guided decision-making optimises correctness (paper: CGED beats random and score-based "
                  "selection by about 0.8-0.9 points). Here: choosing among the 4 trees' answers (no correction, "
                  "so answers can be wrong) by CGED solves more puzzles than choosing one at random."),
            source=SOURCE, metric="claims.cged_vs_random.mean", comparison=">", threshold=0.0, kind="direction",
            role="claim", interval=ci("claims.cged_vs_random"), per_setting="claims.cged_vs_random_by_temperature",
            scaled=ACROSS,
            control=Control(name="a second random choice minus the first (A/A)",
                            metric="claims.random_vs_random.mean", interval=ci("claims.random_vs_random")),
        ),
        Claim(
            id="value_model_learned", role="sanity", kind="direction",
            text="The small GPT's value head separates solvable from unsolvable held-out states better than the "
                 "majority label (else the searches below have no value model).",
            source="implementation check", metric="sanity.value_accuracy_over_majority.mean", comparison=">",
            threshold=0.0,
        ),
        Claim(
            id="corrected_answers_are_right", role="sanity", kind="exact",
            text="With the rule-based correction every answer a tree gives is a real solution (the correction "
                 "recomputes every step), so wrong answers only exist without it.",
            source="implementation check (holds by construction)", metric="sanity.wrong_answers_with_correction",
            comparison="<=", threshold=0.0,
        ),
    ),
    limitations=(
        "The LLM is replaced by a 2-layer word-level GPT (about 0.17M parameters, one token per number) trained "
        "from scratch in about a minute of CPU on Game-of-24 moves taught by exact search; its proposals, value judgements and expert scores are "
        "learned, so its errors are learned too, but it has no language, no few-shot prompting and no general "
        "reasoning. The claims checked are the FoT protocol's claims on this stand-in: nothing here says how "
        "Llama-3 or any real LLM behaves, and the paper's absolute success rates (74.74% for ToT, 91.58% for FoT) "
        "are not comparable. Moves are restricted to integer results in [0, 999] (the classical game allows "
        "fractions: 1346 of the 1820 puzzles are solvable here, 1362 classically), the CoT baseline writes one move "
        "per call instead of a whole solution, the expert of CGED is the same small model's log-likelihood of an "
        "answer instead of a larger LLM, and one model serves all seeds (the seeds vary the test puzzles, the "
        "trees' input orders and all sampling, not the model's training)."
    ),
)
