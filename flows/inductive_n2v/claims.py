"""The claims of inductive node2vec, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

WHERE = ("on planted SBM graphs (n = 500, 5 classes, mean degree 10; homophily 0.8 and 0.25) at train fractions "
         "0.1 / 0.4 / 0.8 (val and test halve the rest), logistic-regression probe on the embeddings alone")
GAIN = ("gain = test accuracy(iN2V) - test accuracy(better baseline), in points; iN2V = the best on validation of "
        "{sampling variant r = 0.5, loss variant w_ms = 1} x {lambda = 1; lambda = 0.5 with delay 0 or 10}; the better "
        "baseline = the better on validation of feature propagation (iterations chosen on validation) and the plain "
        "extension (plain N2V, lambda = 1)")
PERMUTED = ("the same trainings, extensions and validation selections with the node labels randomly permuted "
            "(no embedding carries information about them)")

PAPER = Paper(
    slug="inductive_n2v",
    title="iN2V: Bringing Transductive Node Embeddings to Inductive Graphs",
    method="iN2V: post-hoc neighbour-mean extension (lambda, delay) + modified N2V training (sampling r / losses alpha, beta)",
    paper_class="B",
    source="abstracts-000.txt #2",
    official_code="Foisunt/iN2V (Code/inductiveN2V.py, train_n2v.py, defaults_n2v.yml, Experiments/*.yml; read in full)",
    claims=(
        Claim(id="gain_at_least_1pp",
              text=("Using iN2V embeddings improves node classification by 1 point on average: mean gain over seeds "
                    f"and (regime, train fraction) cells >= 1 point; {GAIN}; {WHERE}"),
              source="abstract; plan claim 1 (magnitude)", metric="gain.mean", comparison=">=", threshold=1.0,
              kind="magnitude", role="claim", interval=ci("gain"), per_setting="gain_by_cell",
              control=Control(name="the gain with the labels permuted", metric="control.gain.mean",
                              interval=ci("control.gain"))),
        Claim(id="gain_positive_in_most_cells",
              text=("iN2V is an effective approach to bringing transductive embeddings to an inductive setting: the "
                    f"seed-mean gain is > 0 in at least 60% of the (regime, train fraction) cells; {GAIN}; {WHERE}"),
              source="abstract; plan claim 1 (direction)", metric="cells_positive_share", comparison=">=",
              threshold=0.6, kind="direction", role="claim", per_setting="cell_positive",
              no_interval_reason="a share of the 6 cells, each cell's gain already averaged over the seeds",
              control=Control(name="the share with the labels permuted",
                              metric="control.cells_positive_share")),
        Claim(id="more_unseen_larger_gain",
              text=("up to 6 points of improvement depending on the dataset and the number of unseen nodes: the gain "
                    "at train fraction 0.1 (90% unseen) exceeds the gain at 0.8 (20% unseen), mean over the two "
                    f"regimes, difference > 0 points; {GAIN}; {WHERE}"),
              source="abstract; plan claim 2 (direction)", metric="gain_few_minus_many_train.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("gain_few_minus_many_train"),
              per_setting="gain_few_minus_many_train_by_regime",
              control=Control(name="the difference with the labels permuted",
                              metric="control.gain_few_minus_many_train.mean",
                              interval=ci("control.gain_few_minus_many_train"))),
        Claim(id="not_above_transductive",
              text=("Transductive N2V, which sees the whole graph in training, bounds the inductive embeddings: "
                    "accuracy(iN2V) - accuracy(transductive N2V) < 1 point, mean over seeds and cells"),
              source="plan claim 3 (sanity)", metric="in2v_minus_transductive.mean", comparison="<", threshold=1.0,
              kind="direction", role="sanity", interval=ci("in2v_minus_transductive")),
    ),
    limitations=(
        "Synthetic SBM graphs stand in for Cora, CiteSeer, PubMed, Photo, Computers, WikiCS, Actor, Roman-empire, "
        "... (no offline copies): the paper's averages over those data sets and its 'up to 6 points' are not "
        "reproducible figures here, only the direction and the order of magnitude. Embeddings only (the paper also "
        "concatenates them to node features and trains GNNs); node2vec is scaled down (d = 32, walks of 10 nodes, "
        "context 5, 4 walks per node, 100 SparseAdam steps at lr 0.1, p = q = 1) and trains for a fixed number of "
        "steps instead of the official early stopping on validation accuracy; iN2V's hyperparameters are a small "
        "grid (the plan's two training variants, lambda in {1, 0.5}, delay in {0, 10}) instead of the official "
        "grid over lr, p, q, d, r, alpha, beta, lambda and delay. The plug-in claim (enriching existing features or "
        "other embeddings) is not checked."
    ),
)
