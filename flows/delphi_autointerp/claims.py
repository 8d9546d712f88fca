"""The claims of delphi_autointerp, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from tasks.contract import Claim, Control, Paper, ci

SWEEP = ("worst over the noisy-scorer flip rates of the run (each binary answer flipped with that probability; "
         "range fixed before the run): the verdict must hold at every rate")
STANDIN = "on the stand-in (small GPT + TopK SAE, scripted explainer and scorers; MiniLM for embedding)"


def _own_vs_shuffled(scorer: str, noisy: bool) -> Claim:
    return Claim(
        id=f"{scorer}_scores_own_above_shuffled",
        text=("We introduce five new techniques to score the quality of interpretations -- the "
              f"{scorer} score of a latent's own explanation exceeds that of another latent's explanation "
              f"(mean over latents, own minus shuffled > 0) {STANDIN}" + (f"; {SWEEP}" if noisy else "")),
        source="abstract; plan (scorers)", metric=f"claims.{scorer}_own.mean", comparison=">", threshold=0.0,
        kind="direction", role="claim", interval=ci(f"claims.{scorer}_own"),
        per_setting=f"claims.{scorer}_own_by_eps" if noisy else None,
        # A/A: two different shufflings should score alike
        control=Control(name="A/A: a second shuffling minus the first", metric=f"claims.{scorer}_aa.mean",
                        interval=ci(f"claims.{scorer}_aa")))


PAPER = Paper(
    slug="delphi_autointerp",
    title="Automatically Interpreting Millions of Features in Large Language Models",
    method="Delphi: automated SAE-latent explanation and scoring (detection, fuzzing, surprisal, embedding, "
           "intervention; simulation baseline)",
    paper_class="C",
    source="abstracts-003.txt #9",
    official_code="EleutherAI/delphi (scorer definitions read via search; nothing copied)",
    claims=(
        Claim(id="detection_sae_above_random_directions",
              text=("SAEs can be used to transform these activations into a higher-dimensional latent space which "
                    "can be more easily interpretable -- mean detection accuracy of SAE latents minus that of "
                    f"density-matched random-direction latents > 0 {STANDIN}; {SWEEP}"),
              source="abstract; plan claim 1 (direction)", metric="claims.detection_vs_random.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.detection_vs_random"), per_setting="claims.detection_vs_random_by_eps",
              control=Control(name="SAE latents with shuffled explanations minus random-direction latents",
                              metric="claims.detection_vs_random_ctrl.mean",
                              interval=ci("claims.detection_vs_random_ctrl"))),
        Claim(id="fuzzing_sae_above_random_directions",
              text=("as above with the fuzzing scorer: mean fuzzing accuracy of SAE latents minus that of "
                    f"random-direction latents > 0 {STANDIN}; {SWEEP}"),
              source="abstract; plan claim 1 (direction)", metric="claims.fuzzing_vs_random.mean",
              comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("claims.fuzzing_vs_random"), per_setting="claims.fuzzing_vs_random_by_eps",
              control=Control(name="SAE latents with shuffled explanations minus random-direction latents",
                              metric="claims.fuzzing_vs_random_ctrl.mean",
                              interval=ci("claims.fuzzing_vs_random_ctrl"))),
        Claim(id="detection_tracks_simulation",
              text=("[scorers] cheaper to run than the previous state of the art -- and tracking it: Spearman "
                    "correlation across latents of detection accuracy with the simulation score (OpenAI-style, "
                    f"Pearson r of simulated and true activations) >= 0.5 {STANDIN}; {SWEEP}. A sanity check, not "
                    "the paper's claim: here detection and simulation both evaluate the same parsed predicate "
                    "(method.detection_answers and method.simulation_score), so they agree by construction"),
              source="abstract; plan claim 2 (the plan's threshold; demoted: holds by construction here)",
              metric="claims.spearman_det_sim.mean", comparison=">=", threshold=0.5, kind="magnitude",
              role="sanity", interval=ci("claims.spearman_det_sim"),
              per_setting="claims.spearman_det_sim_by_eps"),
        Claim(id="intervention_recalls_missed_latents",
              text=("intervention scoring ... explains latents that are not recalled by existing methods -- among "
                    "SAE latents with detection accuracy < 0.6, the fraction with intervention score > 0.6 is >= "
                    f"0.10 (latents pooled over seeds, Clopper-Pearson 95% interval) {STANDIN}; {SWEEP}"),
              source="abstract; plan claim 3 (magnitude; the threshold is the plan's own, the paper's claim is "
                     "qualitative: exploratory)",
              metric="claims.intervention_recall.mean", comparison=">=", threshold=0.10, kind="magnitude",
              role="claim", interval=ci("claims.intervention_recall"),
              per_setting="claims.intervention_recall_by_eps",
              control=Control(name="the same fraction with a shuffled output explanation",
                              metric="claims.intervention_recall_ctrl.mean",
                              interval=ci("claims.intervention_recall_ctrl"))),
        Claim(id="quantile_explanations_cover_low_activations",
              text=("We propose guidelines for generating better interpretations that remain valid for a broader "
                    "set of activating contexts -- detection accuracy on held-out lowest-quantile activating "
                    "contexts (vs random non-activating) of explanations from quantile-sampled examples minus "
                    f"explanations from top-activating examples > 0 {STANDIN}; {SWEEP}"),
              source="abstract; plan claim 4 (direction)", metric="claims.quantile_low.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.quantile_low"),
              per_setting="claims.quantile_low_by_eps",
              control=Control(name="the same difference on the highest-quantile contexts (where top-activating "
                                   "examples are representative)", metric="claims.quantile_high.mean",
                              interval=ci("claims.quantile_high"))),
        _own_vs_shuffled("detection", noisy=True),
        _own_vs_shuffled("fuzzing", noisy=True),
        _own_vs_shuffled("surprisal", noisy=False),
        _own_vs_shuffled("embedding", noisy=False),
        _own_vs_shuffled("intervention", noisy=False),
        Claim(id="lm_learns_the_grammar", text="the small GPT's held-out next-token loss / the unigram loss < 0.9",
              source="our implementation", metric="sanity.lm_over_unigram", comparison="<", threshold=0.9,
              kind="magnitude", role="sanity"),
        Claim(id="sae_reconstructs", text="the TopK SAE explains > 70% of the residual variance (held-out tokens)",
              source="our implementation", metric="sanity.explained_variance", comparison=">", threshold=0.7,
              kind="magnitude", role="sanity"),
        Claim(id="explanations_round_trip",
              text="every scripted explanation parses back to the predicate that wrote it (fraction = 1)",
              source="our implementation", metric="sanity.round_trip", comparison=">=", threshold=1.0,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "No LLM runs here: the interpreted model is a 2-block, 64-wide word-level GPT trained from scratch on a "
        "procedural grammar (8 word classes, quotes, brackets), the explainer is a SCRIPTED EXPLAINER (the best-F1 "
        "token-class / token-set predicate with an optional context clause, written as a template sentence), and "
        "the detection, fuzzing and simulation scorers are a SCRIPTED SCORER that parses that sentence back into "
        "the predicate; the noisy scorer (answers flipped at rates swept over a range fixed before the run) "
        "mimics an LLM judge's errors, nothing more. Surprisal and intervention scoring use a unigram scorer LM "
        "conditioned on the explanation's word set instead of an LLM reading the explanation as a prefix, so "
        "they ignore context clauses. The embedding scorer is the real all-MiniLM-L6-v2. What this cannot show: "
        "the interpretability of real LLM latents, the quality of LLM-written explanations, the paper's "
        "scorer costs and figures, or the agreement of LLM scorers; since detection and simulation read the "
        "same parsed predicate, their agreement holds by construction (reported as a sanity check, not counted) "
        "and says nothing about what separate LLM calls would give."
    ),
)
