"""The claims of representation shattering in knowledge editing, fixed before any run: each names a metric of
``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

WHERE = ("on SmolLM2-135M-Instruct (ROME on block 6's MLP down-projection; per seed 12 counterfactual month edits, "
         "2 at each ring distance d in {1,...,6} of the 12-month cycle, plus 2 same-object edits); mean over seeds "
         "with a Student-t interval")
PERMUTED = "the same statistic with the edits' distance labels permuted (seeded): no geometry behind the labels"
GATE = ("model_recalls_the_facts", "rome_edits_succeed", "rome_update_is_exact")
RING = ("months_form_a_ring",)

PAPER = Paper(
    slug="repr_shattering_ke",
    title="Representation Shattering in Transformers: A Synthetic Study with Knowledge Editing",
    method="ROME rank-one knowledge edits of a pretrained LM's cyclic knowledge (months); shattering "
           "R = |D_edit - D_orig|_F / |D_orig|_F of the entity-representation distance matrix",
    paper_class="B",
    source="abstracts-000.txt #14",
    official_code=None,
    claims=(
        Claim(id="shattering_grows_with_edit_distance",
              text=("Shattering grows with how far an edit conflicts with the learned geometry: per seed, Spearman "
                    f"rank correlation of the ring distance d of the edit with R is > 0 {WHERE}"),
              source="paper (r^2 = 0.905 between edit distance and shattering; Llama month cycles); plan claim 1 "
                     "(direction)",
              metric="shatter.spearman_d_R.mean", comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("shatter.spearman_d_R"), requires=GATE + RING,
              control=Control(name=f"Spearman with {PERMUTED}", metric="control.spearman_d_R_permuted.mean",
                              interval=ci("control.spearman_d_R_permuted"))),
        Claim(id="shattering_linear_in_edit_distance",
              text=("... with a strong correlation: r^2 of the least-squares line of mean R on d (six distances) "
                    f">= 0.5 {WHERE}"),
              source="paper r^2 = 0.905; plan claim 1 (magnitude, r^2 >= 0.5)",
              metric="shatter.r2_d_R.mean", comparison=">=", threshold=0.5, kind="magnitude", role="claim",
              interval=ci("shatter.r2_d_R"), requires=GATE + RING,
              scaled="the plan's 0.5, not the paper's 0.905: six distances x 2 edits per seed",
              control=Control(name=f"r^2 with {PERMUTED}", metric="control.r2_permuted_d.mean",
                              interval=ci("control.r2_permuted_d"))),
        Claim(id="shattering_tracks_recall_loss",
              text=("Representation shattering degrades the model's factual recall: per seed, Spearman of R with "
                    "the drop in recall of unedited facts (other months' and every weekday's after/before facts) "
                    f">= 0.5 {WHERE}"),
              source="abstract; plan claim 2", metric="shatter.spearman_R_recall_drop.mean", comparison=">=",
              threshold=0.5, kind="direction", role="claim", interval=ci("shatter.spearman_R_recall_drop"),
              requires=GATE,
              control=Control(name="the same Spearman with R paired to another edit's recall drop (seeded permutation)",
                              metric="control.spearman_R_recall_drop_permuted.mean",
                              interval=ci("control.spearman_R_recall_drop_permuted"))),
        Claim(id="far_edits_hurt_recall_more",
              text=("Edits that conflict more with the geometry do more damage: far edits (d >= 3) reduce recall of "
                    f"unedited facts by >= 2 pp more than near edits (d <= 2) {WHERE}"),
              source="paper (distance-dependent degradation); plan claim 3",
              metric="shatter.far_minus_near_recall_drop.mean", comparison=">=", threshold=0.02, kind="magnitude",
              role="claim", interval=ci("shatter.far_minus_near_recall_drop"), requires=GATE,
              control=Control(name=f"far minus near recall drop with {PERMUTED}",
                              metric="control.far_minus_near_recall_permuted.mean",
                              interval=ci("control.far_minus_near_recall_permuted"))),
        Claim(id="far_edits_hurt_reasoning_more",
              text=("... and reasoning: far edits (d >= 3) reduce the accuracy of 'the month two months after X' "
                    f"(chains avoiding the edited month) by >= 2 pp more than near edits {WHERE}"),
              source="abstract ('degrades ... reasoning performance'); plan claim 3's form on composition",
              metric="shatter.far_minus_near_composition_drop.mean", comparison=">=", threshold=0.02,
              kind="magnitude", role="claim", interval=ci("shatter.far_minus_near_composition_drop"),
              requires=GATE + ("model_composes_the_months",),
              control=Control(name=f"far minus near composition drop with {PERMUTED}",
                              metric="control.far_minus_near_composition_permuted.mean",
                              interval=ci("control.far_minus_near_composition_permuted"))),
        Claim(id="ke_degrades_recall",
              text=("Applying KE adversely affects broader factual recall: the mean drop in recall of unedited facts "
                    f"over all counterfactual edits (d >= 1) is > 0 {WHERE}"),
              source="abstract", metric="shatter.recall_drop_counterfactual.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("shatter.recall_drop_counterfactual"), requires=GATE,
              control=Control(name="same-object edits (d = 0: the full ROME pipeline asserting the true object, no conflict with the cycle)",
                              metric="control.recall_drop_same_object.mean",
                              interval=ci("control.recall_drop_same_object"))),
        Claim(id="model_recalls_the_facts",
              text=("capability gate: the unedited model recalls the facts (candidate-argmax accuracy over the 38 "
                    "zero-shot month and weekday after/before facts) >= 0.75"),
              source="ours (the paper edits facts its models know)", metric="model.fact_recall.mean",
              comparison=">=", threshold=0.75, kind="magnitude", role="sanity"),
        Claim(id="model_composes_the_months",
              text="capability gate for reasoning: 'The month two months after X is' answered (candidate argmax) >= 0.5",
              source="ours (reasoning over the structure)", metric="model.composition_accuracy.mean",
              comparison=">=", threshold=0.5, kind="magnitude", role="sanity"),
        Claim(id="months_form_a_ring",
              text=("the paper's premise: the months' representations (residual after block 15) hold the cycle, "
                    "Spearman of representation distance with ring distance over month pairs >= 0.3"),
              source="paper (Isomap rings of entity representations)", metric="model.ring_geometry_months.mean",
              comparison=">=", threshold=0.3, kind="magnitude", role="sanity"),
        Claim(id="rome_edits_succeed",
              text="ROME's edits take: the edited fact's top candidate is the new month in >= 90 % of counterfactual edits",
              source="our editor", metric="edit.success_rate.mean", comparison=">=", threshold=0.9, kind="magnitude",
              role="sanity"),
        Claim(id="rome_update_is_exact",
              text=("the edited layer maps the key to the target value: |W' k* - v*| / |v*| in the edited model's "
                    "float32 forward, max over every edit, < 1e-4"),
              source="ROME closed form (Meng et al. 2022)", metric="edit.exactness_max_rel", comparison="<",
              threshold=1e-4, kind="exact", role="sanity"),
    ),
    limitations=(
        "SmolLM2-135M-Instruct, not the paper's Llama/Mamba, and only ROME (not MEMIT/PMET/AlphaEdit); the synthetic "
        "from-scratch knowledge graph of the paper's main part is not run here (this paper's stand-in moved to the "
        "real model). The structure is the 12 months (edited) and the 7 weekdays (unedited); 56 edits in all, 2 per "
        "distance and seed, zero-shot prompts with candidate scoring. Recall and reasoning sets are small (36 unedited "
        "facts, up to 10 two-step questions per edit), so accuracy drops move in steps of ~3 pp. ROME's C comes from "
        "16k tokens of Python docstrings, not 100k Wikipedia samples, and its context prefixes are 8 fixed phrases, "
        "not model-generated text. Edit and representation layers (blocks 6 and 15) were fixed before any run, not "
        "chosen by causal tracing."
    ),
)
