"""The claims of representation shattering in knowledge editing, fixed before any run: each names a metric of
``evaluate.py`` and its threshold."""

from __future__ import annotations

from tasks.contract import Claim, Control, Paper, ci

WHERE = ("on the stand-in (a 2-block GPT trained from scratch on a 64-entity, 2-cycle knowledge graph; ROME on block "
         "1's MLP output matrix; 60 counterfactual edits per model, 10 at each ring distance d in {1,2,4,8,16,32}); "
         "mean over models (seeds) with a Student-t interval")
PERMUTED = "the same statistic with the edits' distance labels permuted (seeded): no geometry behind the labels"

PAPER = Paper(
    slug="repr_shattering_ke",
    title="Representation Shattering in Transformers: A Synthetic Study with Knowledge Editing",
    method="ROME rank-one knowledge edits on a Transformer trained on a cyclic knowledge graph; shattering "
           "R = |D_edit - D_orig|_F / |D_orig|_F of the entity-representation distance matrix",
    paper_class="B",
    source="abstracts-000.txt #14",
    official_code=None,
    claims=(
        Claim(id="shattering_grows_with_edit_distance",
              text=("Shattering grows with how far an edit conflicts with the learned geometry: per model, Spearman "
                    f"rank correlation of the ring distance d of the edit with R is > 0 {WHERE}"),
              source="paper (r^2 = 0.905 between edit distance and shattering); plan claim 1 (direction)",
              metric="shatter.spearman_d_R.mean", comparison=">", threshold=0.0, kind="direction", role="claim",
              interval=ci("shatter.spearman_d_R"),
              # the same old/new objects, but their distance on the cycle the edited relation does not use
              control=Control(name="Spearman of R with the old/new objects' ring distance on the *other* cycle",
                              metric="control.spearman_dother_R.mean", interval=ci("control.spearman_dother_R"))),
        Claim(id="shattering_linear_in_edit_distance",
              text=("... with a strong correlation: r^2 of the least-squares line of mean R on d (six distances) "
                    f">= 0.5 {WHERE}"),
              source="paper r^2 = 0.905; plan claim 1 (magnitude, r^2 >= 0.5)",
              metric="shatter.r2_d_R.mean", comparison=">=", threshold=0.5, kind="magnitude", role="claim",
              interval=ci("shatter.r2_d_R"),
              scaled="the plan's 0.5, not the paper's 0.905: six distances x 10 edits per small model",
              control=Control(name=f"r^2 with {PERMUTED}", metric="control.r2_permuted_d.mean",
                              interval=ci("control.r2_permuted_d"))),
        Claim(id="shattering_tracks_recall_loss",
              text=("Representation shattering degrades the model's factual recall: per model, Spearman of R with "
                    f"the drop in recall of unedited facts (subjects other than the edited one) >= 0.5 {WHERE}"),
              source="abstract; plan claim 2", metric="shatter.spearman_R_recall_drop.mean", comparison=">=",
              threshold=0.5, kind="direction", role="claim", interval=ci("shatter.spearman_R_recall_drop"),
              control=Control(name="the same Spearman with R paired to another edit's recall drop (seeded permutation)",
                              metric="control.spearman_R_recall_drop_permuted.mean",
                              interval=ci("control.spearman_R_recall_drop_permuted"))),
        Claim(id="far_edits_hurt_recall_more",
              text=("Edits that conflict more with the geometry do more damage: far edits (d >= 16) reduce recall of "
                    f"unedited facts by >= 2 pp more than near edits (d <= 2) {WHERE}"),
              source="paper (distance-dependent degradation); plan claim 3", metric="shatter.far_minus_near_recall_drop.mean",
              comparison=">=", threshold=0.02, kind="magnitude", role="claim",
              interval=ci("shatter.far_minus_near_recall_drop"),
              control=Control(name=f"far minus near recall drop with {PERMUTED}",
                              metric="control.far_minus_near_recall_permuted.mean",
                              interval=ci("control.far_minus_near_recall_permuted"))),
        Claim(id="far_edits_hurt_reasoning_more",
              text=("... and reasoning: far edits (d >= 16) reduce the accuracy of 2-hop compositions (the model's "
                    f"own intermediate; chains avoiding the edited subject) by >= 2 pp more than near edits {WHERE}"),
              source="abstract ('degrades ... reasoning performance'); plan measure (composition accuracy), claim 3's form",
              metric="shatter.far_minus_near_composition_drop.mean", comparison=">=", threshold=0.02,
              kind="magnitude", role="claim", interval=ci("shatter.far_minus_near_composition_drop"),
              control=Control(name=f"far minus near composition drop with {PERMUTED}",
                              metric="control.far_minus_near_composition_permuted.mean",
                              interval=ci("control.far_minus_near_composition_permuted"))),
        Claim(id="ke_degrades_recall",
              text=("Applying KE adversely affects broader factual recall: the mean drop in recall of unedited facts "
                    f"over all counterfactual edits (d >= 1) is > 0 {WHERE}"),
              source="abstract", metric="shatter.recall_drop_counterfactual.mean", comparison=">", threshold=0.0,
              kind="direction", role="claim", interval=ci("shatter.recall_drop_counterfactual"),
              control=Control(name="same-object edits (d = 0: the full ROME pipeline re-asserting the old fact)",
                              metric="control.recall_drop_same_object.mean",
                              interval=ci("control.recall_drop_same_object"))),
        Claim(id="model_learns_the_graph",
              text="the stand-in recalls its training facts: greedy accuracy on training facts >= 0.95 (plan)",
              source="plan (train to >= 95 % fact accuracy)", metric="model.train_recall.mean", comparison=">=",
              threshold=0.95, kind="magnitude", role="sanity"),
        Claim(id="rome_edits_succeed",
              text="ROME's edits take: the edited fact predicts its new object (greedy) in >= 90 % of counterfactual edits",
              source="our editor", metric="edit.success_rate.mean", comparison=">=", threshold=0.9, kind="magnitude",
              role="sanity"),
        Claim(id="rome_update_is_exact",
              text="the rank-one update meets ROME's constraint W' k* = v* (max abs error, float64, every edit) < 1e-9",
              source="ROME closed form (Meng et al. 2022)", metric="edit.exactness_max_abs", comparison="<",
              threshold=1e-9, kind="exact", role="sanity"),
    ),
    limitations=(
        "The stand-in is a 2-block, 64-wide GPT trained for seconds on 64 entities and 2 cyclic orders, not the "
        "paper's Transformer, and nothing here touches Llama or Mamba: the paper's naturalistic month-cycle "
        "experiments, its MEMIT/PMET/AlphaEdit editors and its LLM-scale figures are not reproduced; the claims are the "
        "protocol's own claims on this stand-in. The stand-in memorises its training facts but infers none of the "
        "held-out ones (accuracy ~0), and its entity representations hold little of the rings (the setup gives the "
        "Spearman of representation distance with ring distance; ~0.02-0.08 on two development seeds, against the "
        "paper's clean Isomap rings): the paper's premise, a ring manifold that an edit shatters, is not met at this "
        "scale, so R measures a generic distortion and the 'structures that allow a model to infer unseen knowledge' "
        "cannot be shown to break here; 'reasoning' is 2-hop composition through the model's own intermediate, over facts it "
        "has seen. No official code exists: the graph, the sequence format, where representations are read and the "
        "edit site are choices made here after the paper's pages and the plan. ROME is ROME's algorithm (keys' second "
        "moment, v* search with its GPT-2-XL hyper-parameters, closed-form rank-one update) re-implemented for this "
        "model, with ROME's fact_token = 'last' edit site (the relation token) because at the subject token its v* "
        "search rarely succeeds in a 2-block model (see the notes)."
    ),
)
