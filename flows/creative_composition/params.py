"""Params of the creative_composition flow (``papers.creative_composition`` in ``params.yaml``): typed, range-checked,
light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import Distinct, Increasing, PaperParams

Share = Annotated[float, Field(gt=0, lt=1)]


class Params(PaperParams):
    n_prompts: int = Field(ge=60, description="clean unique prompts per simulated log (the planted use cases)")
    creative_share: Annotated[list[Share], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: planted share of creative-composition prompts among the unique ones")
    duplicate_rate: Annotated[list[Share], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: share of the non-junk log that is heavy users' near-duplicate copies")
    junk_share: Annotated[list[Share], Distinct, Increasing] = Field(
        min_length=1, description="SIMULATOR KNOB, swept: share of the log the filters must drop (other languages, "
                                  "moderation keywords, too short, too long)")
    heavy_users: int = Field(ge=1, description="creative prompts that heavy users resubmit; the copies are spread over them")
    min_words: int = Field(ge=1, description="length filter: fewest words a kept prompt has")
    max_words: int = Field(ge=2, description="length filter: most words a kept prompt has")
    minhash_permutations: int = Field(ge=16, description="MinHash permutations (datasketch num_perm)")
    dedup_threshold: float = Field(gt=0, lt=1, description="estimated Jaccard similarity of 5-gram shingles at which a prompt is a near-duplicate")
    k_grid: Annotated[list[Annotated[int, Field(ge=2)]], Distinct, Increasing] = Field(
        min_length=1, description="KMeans cluster counts tried; the best silhouette wins")
    kmeans_inits: int = Field(ge=1, description="KMeans restarts (n_init)")
    hdbscan_min_cluster_size: int = Field(ge=2, description="HDBSCAN's min_cluster_size (the alternative clusterer)")
    real_prompts_jsonl: str | None = Field(default=None, description="path of a local JSONL of real prompts "
                                           "({\"text\": ...} per line, e.g. WildChat); analysed when given, never in CI")
    real_max_prompts: int = Field(default=5000, ge=100, description="prompts read from real_prompts_jsonl")


SMOKE = {"seeds": 2, "n_prompts": 120, "creative_share": [0.3], "duplicate_rate": [0.25], "junk_share": [0.15],
         "k_grid": [8, 12], "kmeans_inits": 1}
