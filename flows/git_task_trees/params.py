"""Params of the git_task_trees flow (``papers.git_task_trees`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams

Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class Params(PaperParams):
    dim: int = Field(ge=4, le=256, description="shared feature space (the analog of GIT's text-embedding space)")
    hidden: int = Field(ge=4, le=512, description="encoder width (SAGE layers and task-tree pooling Linear)")
    layers: int = Field(ge=1, le=4, description="GraphSAGE-mean layers of the encoder")
    n_prototypes: int = Field(ge=2, le=64, description="shared class prototypes all domains draw their classes from")
    n_classes: int = Field(ge=2, le=16, description="node classes per domain")
    nodes_per_graph: int = Field(ge=20, le=5000, description="nodes of each domain's CSBM graph")
    mean_degree: float = Field(gt=0, description="expected mean degree of the CSBM graphs")
    source_homophily: list[Unit] = Field(min_length=1, description="edge homophily of each pretraining domain")
    target_homophily: list[Unit] = Field(min_length=1, description="edge homophily of each held-out domain")
    node_signal: float = Field(ge=0, description="norm of the class prototype in a node's features (noise N(0, I))")
    shift_scale: float = Field(ge=0, description="norm of each domain's feature shift vector")
    graphs_per_family: int = Field(ge=2, description="small graphs per family per domain (graph-level tasks)")
    small_graph_nodes: int = Field(ge=8, le=200, description="nodes of each small graph")
    graph_signal: float = Field(ge=0, description="norm of the family prototype in a small graph's node features")
    pretrain_steps: int = Field(ge=0, description="full-batch pretraining steps")
    pretrain_lr: float = Field(gt=0, description="AdamW learning rate of pretraining")
    feature_mask: Unit = Field(description="feature-masking probability of each augmented view (official 0.2)")
    edge_drop: Unit = Field(description="edge-dropping probability of each augmented view (official 0.2)")
    align_lambda: float = Field(ge=0, description="weight of the KL alignment regulariser (official pt_align_reg_lambda 10)")
    edges_per_step: int = Field(ge=1, description="edge task-trees sampled per pretraining step")
    shots: int = Field(ge=1, le=50, description="labelled support examples per class (few-shot)")
    finetune_steps: int = Field(ge=1, description="full-batch fine-tuning steps on the support set")
    finetune_lr: float = Field(gt=0, description="Adam learning rate of fine-tuning (encoder + linear head)")
    link_holdout: float = Field(gt=0, lt=1, description="share of a target graph's edges held out for link tasks")
    link_queries: int = Field(ge=10, description="positive (and as many negative) link queries per target domain")

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.n_classes > self.n_prototypes:
            raise ValueError("each domain draws n_classes distinct prototypes: need n_prototypes >= n_classes")
        if self.graphs_per_family <= self.shots:
            raise ValueError("graphs_per_family must exceed shots (the rest are the graph-level queries)")
        return self


SMOKE = {"seeds": 2, "nodes_per_graph": 80, "graphs_per_family": 7, "small_graph_nodes": 12,
         "pretrain_steps": 5, "finetune_steps": 5, "link_queries": 20, "edges_per_step": 64, "hidden": 16}
