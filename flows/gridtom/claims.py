"""The claims of GridToM, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

ON_REAL_LM = ("on SmolLM2-135M-Instruct reading text GridToM stories (a grid world of four rooms; the object is "
              "moved while the protagonist is away or looking elsewhere, or while the protagonist watches)")
GATES = ("model_answers_reality", "model_answers_true_belief")

PAPER = Paper(
    slug="gridtom",
    title="From Black Boxes to Transparent Minds: Evaluating and Enhancing the Theory of Mind in Multimodal LLMs",
    method="GridToM (dataset) + per-head probing + training-free attention-head steering (ITI-style)",
    paper_class="B",
    source="abstracts-003.txt #19",
    official_code=None,
    claims=(
        Claim(id="best_head_separates_perspectives",
              text=("attention heads ... can distinguish cognitive information across perspectives: held-out "
                    "accuracy of the best head's linear probe for the protagonist's false vs true belief (balanced, "
                    f"held-out stories) >= 0.8 {ON_REAL_LM}"),
              source="abstract; plan claim check 1 (magnitude)", metric="probe.best_head.mean", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", interval=ci("probe.best_head"), requires=GATES,
              # with the labels permuted the best of the heads can only fit noise
              control=Control(name="best head, probes fit on permuted labels", metric="probe.best_head_permuted.mean",
                              interval=ci("probe.best_head_permuted"))),
        Claim(id="median_head_does_not",
              text=("... some heads, not all (plan): held-out accuracy of the median head's probe for false vs true "
                    f"belief <= 0.65 {ON_REAL_LM}"),
              source="plan claim check 1 (magnitude)", metric="probe.median_head.mean", comparison="<=",
              threshold=0.65, kind="magnitude", role="claim", interval=ci("probe.median_head"), requires=GATES,
              # a label every head at the answer position can read (which question ends the same story: belief or
              # reality): its median head must come out above 0.65, or the median could not exceed the threshold
              control=Control(name="median head, probes for which question is asked (belief vs reality)",
                              metric="probe.median_head_question.mean", interval=ci("probe.median_head_question"))),
        Claim(id="steering_improves_false_belief",
              text=("a lightweight, training-free approach ... significantly enhances the model's exhibited ToM by "
                    "adjusting in the direction of the attention head: test accuracy on false-belief questions with "
                    "the top-K heads shifted by alpha * sigma * theta ((K, alpha) chosen on validation) - accuracy "
                    f"without intervention >= 0.05 {ON_REAL_LM}"),
              source="abstract; plan claim check 2 (magnitude + direction)",
              metric="diff.steered_minus_none.false_belief.mean", comparison=">=", threshold=0.05,
              kind="magnitude", role="claim", interval=ci("diff.steered_minus_none.false_belief"), requires=GATES,
              # the better, per seed, of K random heads (their own directions) and the top-K heads shifted along
              # random directions, same K, alpha and sigma: the most favourable control
              control=Control(name="best of K random heads / random directions, same K and alpha",
                              metric="diff.control_minus_none.false_belief.mean",
                              interval=ci("diff.control_minus_none.false_belief"))),
        Claim(id="steering_spares_reality",
              text=("side effects (plan): test accuracy on reality questions ('in which room is the object now') "
                    f"without intervention - with the chosen steering <= 0.02 {ON_REAL_LM}; gated on the steering "
                    "changing false-belief answers at all (else sparing reality is vacuous)"),
              source="plan claim check 3 (magnitude)", metric="diff.none_minus_steered.reality.mean",
              comparison="<=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("diff.none_minus_steered.reality"), requires=("steering_changes_false_belief", *GATES),
              # the heads the steering shifts, mean-ablated instead: if reality does not depend on them, sparing it
              # is no evidence
              control=Control(name="the chosen top-K heads mean-ablated at the answer position",
                              metric="diff.none_minus_steered_heads_ablated.reality.mean",
                              interval=ci("diff.none_minus_steered_heads_ablated.reality"))),
        Claim(id="model_answers_reality",
              text=("capability gate: without intervention the model names the object's current room on test "
                    "reality questions above chance (two candidate rooms): accuracy > 0.5"),
              source="ours (capability gate)", metric="accuracy.none.reality.mean", comparison=">", threshold=0.5,
              kind="magnitude", role="sanity", interval=ci("accuracy.none.reality")),
        Claim(id="model_answers_true_belief",
              text=("capability gate: without intervention the model answers true-belief questions (the protagonist "
                    "watched the move) above chance: accuracy > 0.5"),
              source="ours (capability gate)", metric="accuracy.none.true_belief.mean", comparison=">",
              threshold=0.5, kind="magnitude", role="sanity", interval=ci("accuracy.none.true_belief")),
        Claim(id="steering_changes_false_belief",
              text=("the chosen steering has an effect to spare reality from: the fraction of false-belief test "
                    "answers it changes > 0.05 (the claimed gain's own size: fewer changed answers cannot give it)"),
              source="ours (working-method gate of steering_spares_reality)",
              metric="changed.false_belief.mean", comparison=">", threshold=0.05, kind="magnitude", role="sanity",
              interval=ci("changed.false_belief")),
        Claim(id="cached_path_matches_full_forward",
              text=("scoring the last token on the cached prefix gives the log-probabilities of a plain forward of "
                    "the whole prompt (max abs difference over seeds < 1e-3): the cache shortcut changes nothing"),
              source="ours", metric="sanity.cache_path_max_abs", comparison="<", threshold=1e-3,
              kind="exact", role="sanity"),
        Claim(id="hook_write_back_is_identity",
              text=("reading every block's head outputs and writing them back unchanged leaves the log-probabilities "
                    "unchanged (max abs difference over seeds < 1e-6): the steering hook has no side effect of its own"),
              source="ours", metric="sanity.hook_identity_max_abs", comparison="<", threshold=1e-6,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "The model is SmolLM2-135M-Instruct, a 135M-parameter text LM, not a multimodal LLM of 7B+ parameters, and "
        "the stories are text built from templates, not GridToM's grid-world videos: nothing here says whether "
        "pretrained MLLMs hold perspective information in their heads when they watch a scene, nor whether steering "
        "helps them; the paper's models, its videos, its K and alpha and its figures are not reproduced. A false- "
        "and a true-belief story differ in the words that tell whether the protagonist saw the move, so a probe can "
        "separate them by reading those words, which is weaker evidence of a belief representation than the paper's "
        "claim. The probing and steering recipe (logistic probes per head at the answer position, ITI mass-mean "
        "shift alpha * sigma * theta on the top-K heads, at the answer position only) is written from the abstract, "
        "the project page and the ITI paper it builds on: no code was released, so details (probe label, which "
        "positions are shifted, K and alpha) are ours, swept or chosen on validation."
    ),
)
