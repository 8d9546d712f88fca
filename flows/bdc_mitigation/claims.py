"""The claims of the BDC mitigation assessment, fixed before any run: each names a metric of ``evaluate.py`` and
its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

STAND_IN = ("on SmolLM2-135M-Instruct contaminated by LoRA, a four-choice cloze benchmark of three families built "
            "here, rule-based strategies")
PLACEBO = ("the clean model fine-tuned with the intensive recipe on held-out non-benchmark items (placebo "
           "contamination)")
# the capability gate: a clean model that knows something, and a contamination that took hold
CAPABLE = ("clean_model_above_chance",)
CONTAMINATED = ("clean_model_above_chance", "contamination_raises_original_accuracy")
MATCH_TOLERANCE = 0.02  # the plan's "accuracy matches the clean model": |delta acc| < 2 pp


def _no_preserving_beats_vanilla(recipe: str) -> Claim:
    return Claim(
        id=f"no_preserving_strategy_beats_vanilla_{recipe}",
        text=("No semantic-preserving strategy yields a significant improvement in resistance over the vanilla case "
              "(i.e., no benchmark update) across all benchmarks -- number of semantic-preserving strategies whose "
              "resistance minus vanilla's has a paired 95% Student-t lower bound > 0 in every benchmark family, "
              f"{recipe} contamination recipe, {STAND_IN} (each typo rate of the sweep counts as a strategy): 0"),
        source="abstract; plan claim check 1", metric=f"claims.preserving_beating_vanilla.{recipe}",
        comparison="<=", threshold=0.0, kind="direction", role="claim",
        no_interval_reason=("a count of strategies, each decided by its own paired 95% Student-t interval over seeds "
                            "in each benchmark family"),
        per_setting=f"claims.preserving_beating_vanilla_by_family.{recipe}", requires=CONTAMINATED,
        # the same significance test must be able to find an improvement where the paper says there is one
        control=Control(name="the same count over the semantic-altering strategies",
                        metric=f"claims.altering_beating_vanilla.{recipe}"))


PAPER = Paper(
    slug="bdc_mitigation",
    title=("The Emperor's New Clothes in Benchmarking? A Rigorous Examination of Mitigation Strategies for LLM "
           "Benchmark Data Contamination"),
    method="Fidelity and contamination resistance: question-level matching of evaluation vectors of clean and "
           "contaminated models on original and updated benchmarks",
    paper_class="B",
    source="abstracts-004.txt #16",
    official_code="ASTRAL-Group/BDC_mitigation_assessment (example/calculate_metrics.ipynb and mitigated_datasets/ read)",
    claims=(
        _no_preserving_beats_vanilla("mild"),
        _no_preserving_beats_vanilla("intensive"),
        Claim(id="altering_strategies_gain_resistance",
              text=("semantic-altering strategies sacrifice fidelity for resistance (resistance part) -- mean "
                    "resistance of the semantic-altering strategies minus mean resistance of the semantic-preserving "
                    f"ones > 0, whole benchmark, {STAND_IN}; worst setting over recipe x typo rate"),
              source="abstract; plan claim check 2", metric="claims.altering_minus_preserving_resistance_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.altering_minus_preserving_resistance_worst"),
              per_setting="claims.altering_minus_preserving_resistance_by_setting", requires=CONTAMINATED,
              # without benchmark exposure there is nothing to resist: the gap must vanish
              control=Control(name=f"the same gap with {PLACEBO}, its most favourable setting",
                              metric="claims.placebo_altering_minus_preserving_best.mean",
                              interval=ci("claims.placebo_altering_minus_preserving_best"))),
        Claim(id="altering_strategies_lose_fidelity",
              text=("semantic-altering strategies sacrifice fidelity for resistance (fidelity part) -- mean fidelity "
                    "of the semantic-altering strategies minus mean fidelity of the semantic-preserving ones < 0, "
                    f"whole benchmark, {STAND_IN}; worst setting over the typo rates"),
              source="abstract; plan claim check 2", metric="claims.altering_minus_preserving_fidelity_worst.mean",
              comparison="<", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.altering_minus_preserving_fidelity_worst"),
              per_setting="claims.altering_minus_preserving_fidelity_by_setting", requires=CAPABLE,
              control=Control(name="the same gap for a uniform random guesser (trivial solution), its most favourable "
                                   "setting", metric="claims.random_altering_minus_preserving_fidelity_best.mean",
                              interval=ci("claims.random_altering_minus_preserving_fidelity_best"))),
        Claim(id="accuracy_matching_hides_mismatch",
              text=("Previous assessment methods, such as accuracy drop and accuracy matching, focus solely on "
                    "aggregate accuracy, often leading to incomplete or misleading conclusions -- among the (recipe, "
                    "strategy) pairs whose contaminated accuracy on the updated benchmark matches the clean model's on "
                    f"the original (|delta acc| < {MATCH_TOLERANCE:g}, mean over seeds), the lowest resistance < 0.8 "
                    f"{STAND_IN}; NaN (inconclusive) when no pair matches"),
              source="abstract; plan claim check 3 (exploratory)", metric="claims.matched_lowest_resistance.mean",
              comparison="<", threshold=0.8, kind="magnitude", role="claim",
              interval=ci("claims.matched_lowest_resistance"), requires=CONTAMINATED,
              control=Control(name=f"the same (recipe, strategy) pair scored against {PLACEBO}",
                              metric="claims.matched_placebo_resistance.mean",
                              interval=ci("claims.matched_placebo_resistance"))),
        Claim(id="clean_model_above_chance",
              text=("the clean model (SmolLM2-135M-Instruct as loaded) answers the original benchmark above chance "
                    "(1/4): accuracy - 0.25 > 0"),
              source="ours (the pipeline needs a capable uncontaminated model)",
              metric="claims.clean_accuracy_above_chance.mean", comparison=">", threshold=0.0, kind="direction",
              role="sanity", interval=ci("claims.clean_accuracy_above_chance")),
        Claim(id="contamination_raises_original_accuracy",
              text=("contamination is effective (the paper validates it): LoRA-contaminated minus clean accuracy on "
                    "the original benchmark > 0, worst recipe"),
              source="paper (contamination validation checks); plan", metric="claims.contamination_gain_worst.mean",
              comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("claims.contamination_gain_worst"), per_setting="claims.contamination_gain_by_recipe"),
        Claim(id="mismatch_bounds_accuracy_gap",
              text=("question-level mismatch is at least the aggregate accuracy gap (holds by construction, checks the "
                    "metric code): min over every row of (1 - resistance) - |acc_conta - acc_clean| on the updated "
                    "benchmark >= 0"),
              source="ours (metric identity)", metric="claims.mismatch_minus_accuracy_gap_min", comparison=">=",
              threshold=0.0, kind="exact", role="sanity"),
    ),
    limitations=(
        "What 135M parameters can and cannot show: the paper assesses 10 LLMs of 7B-70B on five real benchmarks "
        "(ARC-C, MMLU, GSM8K, ...) with 20 GPT-4o rewrites; here one 135M model, as pretrained, answers a four-choice "
        "cloze benchmark built in code (capitals it mostly knows, word categories it partly knows, one-digit sums "
        "near chance), contamination is a small LoRA (rank 8 on q/v) fine-tune on a few dozen question + answer "
        "texts (mild and intensive: two epoch counts of one run), and the strategies are ten rules (no "
        "translation, no LLM-generated extensions; the official incorrect_choice adds wrong options, so it is "
        "semantic-preserving here). A model this small memorises a handful of short texts within a few dozen "
        "steps and also learns the answer format, which moves held-out items too: the placebo fine-tune on other "
        "facts measures that part. Cloze scoring never shows the choices, so permute_choices cannot change a "
        "score (its row equals vanilla) and add_incorrect_choices only adds competitors. The intervals are over "
        "seeds (benchmark draw, strategy randomness, LoRA init and data order) at a few dozen items per seed; "
        "'across all benchmarks' is read as across the three families."
    ),
)
