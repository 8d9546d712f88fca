"""CoSER, the claims: the CoSER-style model's LifeChoice level against the permuted-profile control, and the
sanity checks (gains over the trait-ignoring baseline, the trait judge). Scored by ``evaluate.py`` on the records
of ``flow.py``."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

LABEL = {"authentic": "CoSER-style GCA data (authentic, with thoughts)",
         "inauthentic": "baseline: trait-ignoring synthetic role-play data",
         "no_thoughts": "ablation: authentic without inner thoughts",
         "authentic_permuted_profiles": "control: CoSER-style model given another character's profile"}
ON = "on held-out books of the invented world (tiny GPT persona models, GCA simulation)"


KNOB = ("A check of our pipeline, not a finding: the baseline corpus is the authentic one with its trait-following "
        "rate set to 0 (every trait redrawn, the decision drawn at random), so authentic minus baseline is that knob "
        "(1 vs 0) read through a learned model; at the knob's null (baseline rate 1) the two corpora are drawn "
        "alike and the gain can only vanish. It checks that the persona model learns the traits its data carry.")


def _gain_sanity(metric: str, text: str, threshold: float, kind: str, source: str, scaled: str | None = None) -> Claim:
    return Claim(
        id=f"{metric}_gain_over_baseline", text=f"{text}. {KNOB}", source=source, metric=f"gain.{metric}.mean",
        comparison=">=" if threshold > 0 else ">", threshold=threshold, kind=kind, role="sanity",
        interval=ci(f"gain.{metric}"), scaled=scaled)


PAPER = Paper(
    slug="coser_gca",
    title="CoSER: Coordinating LLM-Based Persona Simulation of Established Roles",
    method="CoSER: given-circumstance acting (GCA) training on authentic multi-character dialogues with inner "
           "thoughts, and the GCA multi-agent evaluation protocol",
    paper_class="C",
    source="abstracts-000.txt #10",
    official_code="Neph0s/CoSER (gca_evaluation/main.py read: the GCA loop and BLEU / ROUGE-L)",
    claims=(
        _gain_sanity("fidelity",
                     "Extensive experiments demonstrate the value of the CoSER dataset for RPLA training [and] evaluation: "
                     "Character Fidelity (trait-judge accuracy on the simulated turns) of the model trained on authentic "
                     f"GCA data minus that of the model trained on trait-ignoring data >= 10 pp, {ON}",
                     0.10, "magnitude", "abstract; plan claim 1 (direction + magnitude)"),
        Claim(id="life_choice_accuracy",
              text=("CoSER 70B ... achieving ... 93.47% accuracy on the LifeChoice benchmark -- analog: the CoSER-style "
                    f"model picks the character's trait-determined decision among 6 options with accuracy >= 0.8, {ON}"),
              source="abstract; plan claim 2 (absolute level)", metric="models.authentic.life_choice.mean",
              comparison=">=", threshold=0.8, kind="magnitude", role="claim",
              interval=ci("models.authentic.life_choice"),
              scaled="the paper's 93.47% is on real novels with a 70B model; the plan fixes 0.8 for the 6-option analog",
              control=Control(name=LABEL["authentic_permuted_profiles"],
                              metric="models.authentic_permuted_profiles.life_choice.mean",
                              interval=ci("models.authentic_permuted_profiles.life_choice"))),
        _gain_sanity("life_choice",
                     "the value of the CoSER dataset for RPLA training: LifeChoice-analog accuracy of the CoSER-style "
                     f"model minus the baseline's > 0, {ON}", 0.0, "direction", "abstract; plan claim 2 (direction)"),
        _gain_sanity("bleu",
                     "the value of the CoSER dataset for RPLA training: BLEU (sacrebleu) of the simulated against the "
                     f"original dialogue, CoSER-style minus baseline > 0, {ON}", 0.0, "direction",
                     "abstract; plan claim 3 (direction); official calculate_bleu_rouge"),
        _gain_sanity("rouge_l",
                     "the value of the CoSER dataset for RPLA training: ROUGE-L F (rouge_score) of the simulated against "
                     f"the original dialogue, CoSER-style minus baseline > 0, {ON}", 0.0, "direction",
                     "abstract; plan claim 3 (direction); official calculate_bleu_rouge"),
        Claim(id="judge_reads_traits",
              text=("our programmatic Character Fidelity judge (bag-of-words logistic regressions for temperament and "
                    "allegiance, fitted on training-book utterances) recovers the speaker's traits from held-out "
                    "ground-truth utterances with mean accuracy >= 0.9"),
              source="own check of the judge", metric="models.ground_truth.fidelity.mean", comparison=">=",
              threshold=0.9, kind="magnitude", role="sanity", interval=ci("models.ground_truth.fidelity")),
    ),
    limitations=(
        "Everything here is an invented world: the 'books' are a trait-conditioned grammar, the persona models are "
        "2-layer word-level GPTs trained from scratch for seconds, the Environment agent is a rule, the NSP is a "
        "logistic ranker, and the judges are programmatic (a bag-of-words trait classifier for Character Fidelity, "
        "1 - repetition rate for Anthropomorphism, 'the scene's decision happens' for Storyline Consistency), not the "
        "paper's GPT-4o critic with flaw-severity scores and length penalty. The stand-in cannot show anything about "
        "LLM role-play quality, knowledge of real books, CoSER 8B/70B, comparisons with GPT-4o, or the real "
        "InCharacter (75.80%) and LifeChoice (93.47%) figures; the InCharacter analog (interviews) and the "
        "retrieval-augmented variants are not run. The baseline's trait-ignoring data are the plan's choice "
        "(trait-following rate 0, not swept): the authentic corpus differs from it only in that rate, so the four "
        "gains over the baseline (fidelity, LifeChoice, BLEU, ROUGE-L) are the knob read through a learned model and "
        "are sanity checks, not reproduced claims; the one claim left is the CoSER-style model's LifeChoice level, "
        "against the permuted-profile control. Scaled: 12 "
        "rounds (official 20), a 2-turn history window (official: the whole conversation), agents see the "
        "broadcast (thought-stripped) history of everyone including themselves, the profile is placed after the "
        "history, and generated turns are clipped to the grammar's longest speech."
    ),
)

