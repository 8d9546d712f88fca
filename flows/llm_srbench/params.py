"""Params of the llm_srbench flow (``papers.llm_srbench`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    n_laws: int = Field(ge=2, le=20, description="Feynman laws (of the 20 typed in method.LAWS) the benchmark is built from")
    synth_per_domain: int = Field(ge=1, description="LSR-Synth problems drawn per domain (chemistry, biology, physics, materials)")
    n_train: int = Field(ge=20, description="training samples a searcher sees per problem")
    n_test: int = Field(ge=20, description="samples in each of the ID, second-ID and OOD test sets")
    ood_stretch: float = Field(gt=0, le=2, description="LSR-Transform OOD inputs lie in (hi, hi + stretch * (hi - lo)]")
    ood_time_fraction: float = Field(gt=0.2, lt=0.9, description="LSR-Synth ODEs: times after this fraction of the horizon are OOD")
    gp_population: int = Field(ge=20, description="gplearn SymbolicRegressor population size")
    gp_generations: int = Field(ge=1, description="gplearn generations")
    gp_parsimony: float = Field(ge=0, description="gplearn parsimony coefficient")
    search_iterations: int = Field(ge=10, description="skeletons the LLM-SR-style search samples and fits per problem")
    search_buffer: int = Field(ge=2, description="size of the search's experience buffer of best skeletons")
    search_max_terms: int = Field(ge=1, le=8, description="most additive terms in one skeleton")
    search_explore: float = Field(ge=0, le=1, description="probability that a skeleton is drawn fresh, not mutated from the buffer")
    search_term_penalty: float = Field(ge=0, description="score penalty per term (score = ln(NMSE + 1e-14) + penalty * terms)")
    round_decimals: int = Field(ge=1, le=8, description="constants are rounded to this many decimals before the symbolic check")
    tolerance: float = Field(gt=0, lt=1, description="tau of Acc_tau: max relative error allowed on every test point")


SMOKE = {"seeds": 2, "n_laws": 3, "synth_per_domain": 1, "n_train": 60, "n_test": 40, "gp_population": 40,
         "gp_generations": 2, "search_iterations": 30}
