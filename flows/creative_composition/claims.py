"""The claims of the creative-composition position paper's stand-in, fixed before any run: each names a metric of
``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

SWEEP = ("over the sweep of the simulated log's knobs (planted creative share, near-duplicate rate, junk share, "
         "each over its range with the others at their middle value; worst setting)")

PAPER = Paper(
    slug="creative_composition",
    title="Position: Societal Impacts Research Requires Benchmarks for Creative Composition Tasks",
    method="thematic analysis of user prompts: moderation/language/length filters, MinHash dedup, embedding "
           "clustering and coding into use categories; usage-vs-benchmark mismatch",
    paper_class="C",
    source="abstracts-003.txt #8",
    official_code=None,
    claims=(
        Claim(id="thematic_analysis_recovers_creative_prevalence",
              text=("Through a thematic analysis using 2 million language model user prompts, we identify creative "
                    "composition tasks as a prevalent usage category -- the pipeline (filters, MinHash dedup, MiniLM, "
                    "KMeans with silhouette k, zero-shot coding) estimates the creative-composition share of the unique "
                    f"use cases within 5 points of the planted share: |estimated - planted| < 0.05, {SWEEP}"),
              source="abstract; plan claim 1 (magnitude)", metric="claims.abs_error_worst.mean", comparison="<",
              threshold=0.05, kind="magnitude", role="claim", interval=ci("claims.abs_error_worst"),
              per_setting="claims.abs_error_by_setting",
              control=Control(name="the same pipeline without MinHash dedup (heavy users' copies counted), its best setting",
                              metric="claims.abs_error_no_dedup_best.mean",
                              interval=ci("claims.abs_error_no_dedup_best"))),
        Claim(id="zero_shot_coding_matches_categories",
              text=("the thematic analysis codes prompts into use categories (the fine-grained analysis) -- prompt-level "
                    "macro-F1 over the 12 planted categories of cluster-then-code labels >= 0.8 (junk that passes the "
                    f"filters counts as an error), {SWEEP}"),
              source="abstract; plan claim 2 (magnitude)", metric="claims.macro_f1_worst.mean", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", interval=ci("claims.macro_f1_worst"),
              per_setting="claims.macro_f1_by_setting",
              control=Control(name="the same coder on clusters of embeddings permuted across prompts, its best setting",
                              metric="claims.macro_f1_shuffled_best.mean", interval=ci("claims.macro_f1_shuffled_best"))),
        Claim(id="mismatch_metric_orders_suites",
              text=("mismatches between current benchmarks and usage patterns -- the suites' mixes are declared here, so "
                    "this only checks the metric: JSD(estimated usage || code/math-heavy suite) - JSD(estimated usage || "
                    "suite covering every category equally) > 0, worst setting"),
              source="abstract; plan claim 3 (direction, sanity of the mismatch metric)",
              metric="claims.jsd_gap_worst.mean", comparison=">", threshold=0.0, kind="direction", role="sanity",
              interval=ci("claims.jsd_gap_worst")),
        Claim(id="filters_drop_junk",
              text=("the moderation, language and length filters drop at least 90% of the planted junk prompts, worst "
                    "setting (checks our filter stage)"),
              source="plan (filtering stage)", metric="claims.junk_removed_worst.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("claims.junk_removed_worst")),
        Claim(id="filters_keep_clean_prompts",
              text=("the filters keep at least 90% of the clean English prompts (langdetect on short prompts is the "
                    "risk), worst setting (checks our filter stage)"),
              source="plan (filtering stage)", metric="claims.clean_kept_worst.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("claims.clean_kept_worst")),
        Claim(id="minhash_removes_near_duplicates",
              text=("MinHash LSH dedup removes at least 90% of the surplus near-duplicates that pass the filters (all "
                    "but one member of each heavy user's prompt-and-copies group), worst setting (checks our dedup stage)"),
              source="plan (deduplication stage)", metric="claims.copies_removed_worst.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="sanity", interval=ci("claims.copies_removed_worst")),
    ),
    limitations=(
        "What the stand-in cannot show: any fact about real usage, including the paper's ~30% creative share (the share "
        "is planted here and swept), and nothing about the societal-harm argument, which is normative. The log is "
        "hand-written templates with Faker entities in 12 categories, far more separable than real prompts, with no "
        "multi-intent or multi-turn prompts; its three knobs (creative share, near-duplicate rate, junk share) are "
        "swept one at a time and every verdict is the worst setting. The human coding of the paper is replaced by "
        "zero-shot coding of cluster centroids against a fixed 12-category codebook, so themes the codebook lacks "
        "cannot emerge. How far MinHash dedup merges distinct short prompts depends on how varied the templates are, "
        "a property of this generator that is not swept. Moderation is a keyword list, not the OpenAI moderation "
        "flags WildChat carries. The benchmark "
        "suites are declared category mixes, not real benchmarks, so the mismatch check is a check of the metric. "
        "A loader for a local JSONL of real prompts (params real_prompts_jsonl) runs the same pipeline on them when "
        "a user has e.g. WildChat on disk; it is never used by default or in tests."
    ),
)
