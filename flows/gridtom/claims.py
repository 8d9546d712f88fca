"""The claims of GridToM, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from tasks.contract import Claim, Control, Paper, ci

ON_STAND_IN = ("on the stand-in (a small GPT trained from scratch on GridToM-lite: two rooms, a door, "
               "agents A and B and an object, each agent's view masked while the door is shut)")

PAPER = Paper(
    slug="gridtom",
    title="From Black Boxes to Transparent Minds: Evaluating and Enhancing the Theory of Mind in Multimodal LLMs",
    method="GridToM (dataset) + per-head probing + training-free attention-head steering (ITI-style)",
    paper_class="C",
    source="abstracts-003.txt #19",
    official_code=None,
    claims=(
        Claim(id="best_head_separates_perspectives",
              text=("attention heads in multimodal large models can distinguish cognitive information across "
                    "perspectives: held-out accuracy of the best head's linear probe for false vs true first-order "
                    f"belief (balanced) >= 0.8 {ON_STAND_IN}"),
              source="abstract; plan claim check 1 (magnitude)", metric="probe.best_head.mean", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", interval=ci("probe.best_head"),
              # with the labels permuted the best of the heads can only fit noise
              control=Control(name="best head, probes fit on permuted labels", metric="probe.best_head_permuted.mean",
                              interval=ci("probe.best_head_permuted"))),
        Claim(id="median_head_does_not",
              text=("... some heads, not all (plan): held-out accuracy of the median head's probe for false vs true "
                    f"first-order belief <= 0.65 {ON_STAND_IN}"),
              source="plan claim check 1 (magnitude)", metric="probe.median_head.mean", comparison="<=",
              threshold=0.65, kind="magnitude", role="claim", interval=ci("probe.median_head"),
              # a label every head at the answer position can read (which agent the question names): its median
              # head must come out above 0.65, or the median statistic could not exceed the threshold at all
              control=Control(name="median head, probes for which agent is asked (A vs B)",
                              metric="probe.median_head_asked_agent.mean",
                              interval=ci("probe.median_head_asked_agent"))),
        Claim(id="steering_improves_false_belief",
              text=("a lightweight, training-free approach ... significantly enhances the model's exhibited ToM by "
                    "adjusting in the direction of the attention head: test accuracy on false-belief first-order "
                    "questions with the top-K heads shifted by alpha * sigma * theta ((K, alpha) chosen on validation) "
                    f"- accuracy without intervention >= 0.05 {ON_STAND_IN}"),
              source="abstract; plan claim check 2 (magnitude + direction)",
              metric="diff.steered_minus_none.false_belief.mean", comparison=">=", threshold=0.05,
              kind="magnitude", role="claim", interval=ci("diff.steered_minus_none.false_belief"),
              # the better, per seed, of K random heads (their own directions) and the top-K heads shifted along
              # random directions of the same norm: the most favourable control
              control=Control(name="best of K random heads / random directions, same K and alpha",
                              metric="diff.control_minus_none.false_belief.mean",
                              interval=ci("diff.control_minus_none.false_belief"))),
        Claim(id="steering_spares_reality",
              text=("side effects (plan): test accuracy on reality questions ('where is the object now') without "
                    f"intervention - with the chosen steering <= 0.02 {ON_STAND_IN}; gated on the steering changing "
                    "false-belief answers at all (else sparing reality is vacuous)"),
              source="plan claim check 3 (magnitude)", metric="diff.none_minus_steered.reality.mean",
              comparison="<=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("diff.none_minus_steered.reality"), requires=("steering_changes_false_belief",),
              # the heads the steering shifts, mean-ablated instead: if reality does not depend on them, sparing it
              # is no evidence (replaces all heads mean-ablated, a strawman that fails by a mile)
              control=Control(name="the chosen top-K heads mean-ablated at the answer position",
                              metric="diff.none_minus_steered_heads_ablated.reality.mean",
                              interval=ci("diff.none_minus_steered_heads_ablated.reality"))),
        Claim(id="steering_changes_false_belief",
              text=("the chosen steering has an effect to spare reality from: the fraction of false-belief test "
                    "answers it changes > 0.05 (the claimed gain's own size: fewer changed answers cannot give it)"),
              source="ours (working-method gate of steering_spares_reality)",
              metric="changed.false_belief.mean", comparison=">", threshold=0.05, kind="magnitude", role="sanity",
              interval=ci("changed.false_belief")),
        Claim(id="model_learned_reality",
              text="the stand-in learned its world: test accuracy on reality questions without intervention >= 0.9",
              source="ours", metric="accuracy.none.reality.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("accuracy.none.reality")),
        Claim(id="hook_write_back_is_identity",
              text=("reading every block's head outputs and writing them back unchanged leaves the logits unchanged "
                    "(max abs difference over seeds < 1e-6): the steering hook has no side effect of its own"),
              source="ours", metric="sanity.hook_identity_max_abs", comparison="<", threshold=1e-6,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "The stand-in is a 4-layer, 4-head GPT (d = 48) trained for seconds from scratch on GridToM-lite; it is not a "
        "multimodal LLM, it sees tokens (cells) instead of video frames, and its 'theory of mind' is whatever "
        "heuristic fits the training questions, where false belief is rare by design (as the plan asks, so that "
        "the model is imperfect on it). Nothing here says whether pretrained MLLMs hold perspective information in "
        "their heads, nor whether steering helps them; the paper's models, its GridToM videos, its K and alpha and "
        "its figures are not reproduced. The per-agent views are given in the input (GridToM's 'perceptual "
        "information from multiple perspectives'), so first-order belief is a lookup of the last unmasked view; "
        "the paper's models must infer visibility from pixels. The probing and steering recipe (logistic probes "
        "per head at the answer position, ITI mass-mean shift alpha * sigma * theta on the top-K heads) is written "
        "from the abstract, the project page and the ITI paper it builds on: no code was released, so details "
        "(probe label, which positions are shifted, K and alpha) are ours, swept or chosen on validation."
    ),
)
