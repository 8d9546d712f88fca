"""The claims of LLM-SRBench, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

PAPER = Paper(
    slug="llm_srbench",
    title="LLM-SRBench: A New Benchmark for Scientific Equation Discovery with Large Language Models",
    method="LLM-SRBench construction (LSR-Transform, LSR-Synth, ID/OOD) and metrics (NMSE, Acc_0.1, symbolic accuracy)",
    paper_class="C",
    source="abstracts-004.txt #18",
    official_code="deep-symbolic-mathematics/llm-srbench (bench/pipelines.py metrics and bench/dataclasses.py interface read)",
    claims=(
        Claim(id="transformation_defeats_memorization",
              text=("LSR-Transform, which transforms common physical models into less common mathematical "
                    "representations to test reasoning beyond memorization -- a memorizer that recalls the 20 original "
                    "laws (any assignment of inputs, one fitted scale) solves at most 30% of the rewritten problems "
                    "(symbolic accuracy, mean over seeds). A sanity check, not the paper's claim: the memorizer tries "
                    "only the original forms (method.discover_memorized), so a rewrite defeats it by construction; "
                    "whether rewrites defeat an LLM's memory is not measured here"),
              source="abstract; plan claim 1 (demoted: holds by construction here)",
              metric="claims.memorizer_transform_acc.mean", comparison="<=", threshold=0.30, kind="direction",
              role="sanity", interval=ci("claims.memorizer_transform_acc")),
        Claim(id="ood_harder_than_id",
              text=("OOD NMSE exceeds ID NMSE for every method on LSR-Synth: log10 median-over-problems NMSE, OOD minus "
                    "ID, paired over seeds, worst method of gplearn / skeleton search / memorizer > 0"),
              source="paper's OOD analysis; plan claim 2", metric="claims.ood_minus_id_worst.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.ood_minus_id_worst"),
              per_setting="claims.ood_minus_id_by_method",
              control=Control(name="a second ID test set in place of the OOD one, its most favourable method",
                              metric="claims.id2_minus_id_best.mean", interval=ci("claims.id2_minus_id_best"))),
        Claim(id="best_method_low_symbolic_accuracy",
              text=("the best-performing system so far achieves only 31.5% symbolic accuracy -- on Mini-LSR-Synth the "
                    "best of gplearn / skeleton search / memorizer (by mean) has symbolic accuracy <= 50%"),
              source="abstract; plan claim 3", metric="claims.best_synth_acc.mean", comparison="<=", threshold=0.50,
              kind="magnitude", role="claim", interval=ci("claims.best_synth_acc"),
              per_setting="claims.synth_acc_by_method",
              scaled="0.315 on 239 LLM-judged problems -> 0.50 on 8 problems per seed (the plan's analog)",
              control=Control(name="the oracle skeleton (the generator's own form, parameters refitted)",
                              metric="claims.oracle_synth_acc.mean", interval=ci("claims.oracle_synth_acc"))),
        Claim(id="memorizer_recalls_original_laws",
              text=("the memorizer solves the original laws it holds (symbolic accuracy >= 0.8): checks the memorizer "
                    "and the symbolic check, holds by construction"),
              source="plan claim 1 (first half)", metric="claims.memorizer_original_acc.mean", comparison=">=",
              threshold=0.8, kind="direction", role="sanity", interval=ci("claims.memorizer_original_acc")),
        Claim(id="symbolic_check_recognises_true_skeleton",
              text=("the refitted true skeleton of every LSR-Synth problem is judged a symbolic solution (accuracy "
                    ">= 0.95): checks the solvability filter, the constant rounding and the sympy equivalence test"),
              source="plan (solvability check)", metric="claims.oracle_synth_acc.mean", comparison=">=",
              threshold=0.95, kind="direction", role="sanity", interval=ci("claims.oracle_synth_acc")),
    ),
    limitations=(
        "What the stand-in cannot show: anything about LLMs. No LLM proposes equations here, so the paper's finding "
        "that LLM-based methods (LLM-SR, LaSR, SGA, LLM-Direct) top out at 31.5% symbolic accuracy is replaced by "
        "non-LLM searchers on a benchmark of 20 Feynman laws and 8 synthetic problems per seed (not 239). The "
        "'memorizer' recalls the original forms by construction; whether real LLMs memorize Feynman equations, and "
        "whether rewrites defeat them, is not measured. Symbolic accuracy is SRBench's sympy criterion after rounding "
        "constants to 3 decimals, not the paper's GPT-4o judge. The skeleton search samples its edits at random "
        "where LLM-SR asks an LLM with domain priors, and its skeletons are linear in their parameters. LSR-Synth "
        "draws four small grammars of our own (the paper's came from LLM-generated candidate terms vetted by "
        "experts), and its data are noise-free. The HF-hub datasets are unreachable offline, so no real loader."
    ),
)
