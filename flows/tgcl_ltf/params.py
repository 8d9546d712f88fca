"""Params of the tgcl_ltf flow (``papers.tgcl_ltf`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # the evolving temporal graph (tasks.graphs.temporal_stream)
    n_nodes: int = Field(ge=20, description="nodes of the synthetic temporal graph")
    n_events: int = Field(ge=300, description="timestamped events in the whole stream")
    n_tasks: int = Field(ge=2, le=10, description="tasks = equal time periods; each introduces new classes")
    classes_per_task: int = Field(ge=1, le=10, description="new node classes that appear at each task's onset")
    n_features: int = Field(ge=2, description="event feature dimension")
    noise: float = Field(gt=0, description="std of the event-feature noise around the class mean")
    drift: float = Field(ge=0, description="rotation angle (radians) of every class mean over the whole stream")
    homophily: float = Field(ge=0, le=1, description="probability that an event joins two nodes of one class")
    test_fraction: float = Field(gt=0, lt=1, description="fraction of each period's events held out for testing")
    val_fraction: float = Field(gt=0, lt=1, description="fraction of the remaining events held out for validation "
                                "(the regularisers' weight choice)")
    # the backbone (TGAT-style attention over the last k events of the source node)
    k_neighbours: int = Field(ge=1, description="recent events attended to per query node")
    time_features: int = Field(ge=1, description="dimension of the functional time encoding")
    hidden: int = Field(ge=2, description="attention hidden width")
    embedding_dim: int = Field(ge=2, description="event-endpoint embedding dimension (input of the linear head)")
    epochs: int = Field(ge=1, description="epochs over each task's new-class training events")
    batch_size: int = Field(ge=2, description="new-class events per step (the replay batch is at most as large)")
    lr: float = Field(gt=0, description="Adam learning rate (fresh optimiser per task)")
    # continual learning
    memory_per_class: int = Field(ge=2, description="stored old-class events per old class, equal for every replay method")
    old_data_weight: float = Field(ge=0, description="weight of the replay loss (official old_data_weight)")
    ewc_lambdas: list[Annotated[float, Field(ge=0)]] = Field(
        min_length=1, description="grid of EWC penalty weights on the per-event diagonal-Fisher quadratic; the best "
        "on validation is used per seed")
    ewc_fisher_events: int = Field(ge=1, description="previous-task training events (a random sample) whose "
                                   "per-event squared gradients average into EWC's Fisher")
    lwf_weights: list[Annotated[float, Field(ge=0)]] = Field(
        min_length=1, description="grid of LwF distillation weights (official: 0.1); the best on validation is used "
        "per seed")
    lwf_temperature: float = Field(gt=0, description="LwF distillation temperature (official default 2)")
    # LTF
    ltf_distribution_per_class: int = Field(ge=1, description="events per old class of LTF's distribution-only "
                                            "subset (MMD target); counted inside memory_per_class")
    ltf_loss_weight: float = Field(ge=0, description="weight of the normalised per-event loss in the greedy "
                                   "selection (official error_min_loss_weight)")
    ltf_mmd_weight: float = Field(ge=0, description="weight of the per-class MMD regulariser (official "
                                  "emb_distribution_distill_weight)")
    ltf_reg_gamma: float = Field(gt=0, description="RBF gamma of the MMD regulariser (official reg_gamma); the "
                                 "selection kernel uses gamma = 1/embedding_dim (official default_gamma)")


SMOKE = {"seeds": 2, "n_nodes": 120, "n_events": 900, "epochs": 2, "memory_per_class": 10,
         "ltf_distribution_per_class": 3}
