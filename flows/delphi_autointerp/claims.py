"""The claims of delphi_autointerp, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

SETUP = ("on SmolLM2-135M-Instruct (TopK SAE on the residual stream after block 14, over Python's help pages; "
         "SmolLM2 itself explains, and scores by log p(Yes) - log p(No); per-latent AUROC of activating against "
         "non-activating windows)")


def _gate(scorer: str, how: str) -> Claim:
    return Claim(id=f"{scorer}_scorer_gate",
                 text=(f"capability gate: the {scorer} scorer ({how}) rates a clearly fitting text above a clearly "
                       "unfitting one for the same description in >= 75% of 8 hand-made cases (fixed before any run)"),
                 source="our capability gate", metric=f"sanity.gate_{scorer}", comparison=">=", threshold=0.75,
                 kind="magnitude", role="sanity")


def _own_vs_shuffled(scorer: str) -> Claim:
    return Claim(
        id=f"{scorer}_scores_own_above_shuffled",
        text=("We introduce five new techniques to score the quality of interpretations -- the "
              f"{scorer} score (AUROC) of a latent's own explanation exceeds that of another latent's explanation "
              f"(mean over latents, own minus shuffled > 0) {SETUP}"),
        source="abstract; plan (scorers)", metric=f"claims.{scorer}_own.mean", comparison=">", threshold=0.0,
        kind="direction", role="claim", interval=ci(f"claims.{scorer}_own"),
        requires=("sae_reconstructs", f"{scorer}_scorer_gate"),
        # A/A: two different shufflings should score alike
        control=Control(name="A/A: a second shuffling minus the first", metric=f"claims.{scorer}_aa.mean",
                        interval=ci(f"claims.{scorer}_aa")))


def _sae_vs_random(scorer: str) -> Claim:
    return Claim(
        id=f"{scorer}_sae_above_random_directions",
        text=("SAEs can be used to transform these activations into a higher-dimensional latent space which can be "
              f"more easily interpretable -- mean {scorer} AUROC of SAE latents (own explanations) minus that of "
              f"density-matched random-direction latents (their own explanations) > 0 {SETUP}"),
        source="abstract; plan claim 1 (direction)", metric=f"claims.{scorer}_vs_random.mean", comparison=">",
        threshold=0.0, kind="direction", role="claim", interval=ci(f"claims.{scorer}_vs_random"),
        requires=("sae_reconstructs", f"{scorer}_scorer_gate"),
        control=Control(name="SAE latents with shuffled explanations minus random-direction latents",
                        metric=f"claims.{scorer}_vs_random_ctrl.mean", interval=ci(f"claims.{scorer}_vs_random_ctrl")))


PAPER = Paper(
    slug="delphi_autointerp",
    title="Automatically Interpreting Millions of Features in Large Language Models",
    method="Delphi: automated SAE-latent explanation (an LLM explainer) and scoring (detection, fuzzing, embedding)",
    paper_class="B",
    source="abstracts-003.txt #9",
    official_code="EleutherAI/delphi (scorer definitions read via search; nothing copied)",
    claims=(
        _sae_vs_random("detection"),
        _sae_vs_random("fuzzing"),
        _own_vs_shuffled("detection"),
        _own_vs_shuffled("fuzzing"),
        _own_vs_shuffled("embedding"),
        Claim(id="sae_reconstructs",
              text="the TopK SAE explains > 70% of the residual variance (held-out rows; worst seed)",
              source="our implementation", metric="sanity.explained_variance", comparison=">", threshold=0.7,
              kind="magnitude", role="sanity"),
        _gate("detection", "SmolLM2, log p(Yes) - log p(No) on 'is the feature present in the text?'"),
        _gate("fuzzing", "SmolLM2, log p(Yes) - log p(No) on 'do the marked words match the description?'"),
        _gate("embedding", "all-MiniLM-L6-v2 cosine similarity of description and text"),
    ),
    limitations=(
        "The interpreted model, the explainer and the scorer are all SmolLM2-135M-Instruct, against the paper's "
        "Llama-3.1-8B and Gemma-2-9B SAEs explained and scored by Llama-3.1-70B: a 135M explainer writes short, "
        "often generic phrases and a 135M scorer reads them weakly, so the scores measure this small pipeline, not "
        "what Delphi reaches with capable LLMs. Scale is reduced to what two CPU cores allow: one SAE of 1,536 "
        "latents trained on ~22k tokens of Python's help pages (the paper: 131k latents and more on billions of "
        "tokens), 8 latents and 8 random directions interpreted per seed, 6 top-activating windows of 16 tokens "
        "shown to the explainer, 4 activating and 4 random non-activating test windows per latent. Not run: "
        "surprisal and intervention scoring, the simulation baseline, hard negatives, and the quantile-sampling "
        "guideline (each needs as many LLM passes again as detection; the budget does not cover them)."
    ),
)
