"""The claims of the BDC mitigation assessment, fixed before any run: each names a metric of ``evaluate.py`` and
its threshold."""

from __future__ import annotations

from tasks.contract import Claim, Control, Paper, ci

STAND_IN = ("on the stand-in (frozen all-MiniLM-L6-v2 + a scoring MLP as the LLM, three synthetic four-choice "
            "benchmark families, rule-based strategies)")
PLACEBO = "the clean model fine-tuned with the same recipe on held-out non-benchmark items (placebo contamination)"
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
        per_setting=f"claims.preserving_beating_vanilla_by_family.{recipe}",
        # the same significance test must be able to find an improvement where the paper says there is one
        control=Control(name="the same count over the semantic-altering strategies",
                        metric=f"claims.altering_beating_vanilla.{recipe}"))


PAPER = Paper(
    slug="bdc_mitigation",
    title=("The Emperor's New Clothes in Benchmarking? A Rigorous Examination of Mitigation Strategies for LLM "
           "Benchmark Data Contamination"),
    method="Fidelity and contamination resistance: question-level matching of evaluation vectors of clean and "
           "contaminated models on original and updated benchmarks",
    paper_class="C",
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
              per_setting="claims.altering_minus_preserving_resistance_by_setting",
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
              per_setting="claims.altering_minus_preserving_fidelity_by_setting",
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
              interval=ci("claims.matched_lowest_resistance"),
              control=Control(name=f"the same (recipe, strategy) pair scored against {PLACEBO}",
                              metric="claims.matched_placebo_resistance.mean",
                              interval=ci("claims.matched_placebo_resistance"))),
        Claim(id="clean_model_above_chance",
              text="the clean stand-in answers the original benchmark above chance (1/4): accuracy - 0.25 > 0",
              source="ours (the pipeline needs a capable uncontaminated model)",
              metric="claims.clean_accuracy_above_chance.mean", comparison=">", threshold=0.0, kind="direction",
              role="sanity", interval=ci("claims.clean_accuracy_above_chance")),
        Claim(id="contamination_raises_original_accuracy",
              text=("contamination is effective (the paper validates it): contaminated minus clean accuracy on the "
                    "original benchmark > 0, worst recipe"),
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
        "What the stand-in cannot show: anything about LLM memorisation or GPT-4o rewrites. The 'LLM' is frozen "
        "all-MiniLM-L6-v2 with a small scoring MLP trained here; contamination is fine-tuning that head on the "
        "original benchmark (mild and intensive = two epoch counts), so memorisation lives in a head over sentence "
        "embeddings, and a strategy resists exactly when it moves the question's embedding away from the memorised "
        "one. The benchmark is three synthetic four-choice families (real capitals, word categories, two-digit "
        "sums), not ARC-C/MMLU/GSM8K..., and the strategies are ten rules standing in for the paper's twenty GPT-4o "
        "rewrites (no translation, no LLM-generated extensions; the official incorrect_choice adds wrong options, so "
        "it is semantic-preserving here, and the plan's negated question has no rule); the typo rate, the one rule "
        "knob, is swept and "
        "every claim takes its worst setting. One benchmark and one set of rewrites per run: the intervals are over "
        "seeds of model training (clean head, contamination order, placebo), not over benchmark draws. 'Across "
        "all benchmarks' is read as across the three families."
    ),
)
