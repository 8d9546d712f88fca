"""Params of the GBRL flow (``papers.gbrl_rl`` in ``params.yaml``): typed, range-checked, and light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

EnvName = Literal["cartpole", "minigrid_empty", "minigrid_doorkey", "irregular"]
MINIGRID = ("minigrid_empty", "minigrid_doorkey")


class GBRLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    n_envs: int = Field(ge=1, description="parallel environments")
    n_steps: int = Field(ge=1, description="steps per env per rollout")
    batch_size: int = Field(ge=2, description="minibatch size; one tree per minibatch step")
    n_epochs: int = Field(ge=1)
    clip_range: float = Field(gt=0)
    ent_coef: float = Field(ge=0)
    vf_coef: float = Field(ge=0)
    policy_lr: float = Field(gt=0, description="SGD learning rate of the policy outputs")
    value_lr: float = Field(gt=0, description="SGD learning rate of the value output")
    max_depth: int = Field(ge=1, le=16)
    n_bins: int = Field(ge=2, description="split candidates per numerical feature (quantiles)")


class NNConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    n_envs: int = Field(ge=1)
    n_steps: int = Field(ge=1)
    batch_size: int = Field(ge=2)
    n_epochs: int = Field(ge=1)
    clip_range: float = Field(gt=0)
    ent_coef: float = Field(ge=0)
    vf_coef: float = Field(ge=0)
    lr: float = Field(gt=0, description="Adam learning rate")
    max_grad_norm: float = Field(gt=0)
    hidden: int = Field(ge=1, description="units of the two hidden layers (policy and value nets)")


class IrregularConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    n_relevant: int = Field(ge=1, le=6)
    n_categories: int = Field(ge=2)
    n_nuisance: int = Field(ge=1, le=6)
    n_nuisance_categories: int = Field(ge=2)
    n_actions: int = Field(ge=2)

    @model_validator(mode="after")
    def _enumerable(self) -> "IrregularConfig":
        if self.n_categories ** self.n_relevant * self.n_nuisance_categories ** self.n_nuisance > 200_000:
            raise ValueError("too many observations to evaluate the expected return exactly (max 200,000)")
        return self


class Params(PaperParams):
    envs: Annotated[list[EnvName], Distinct] = Field(
        min_length=3, description="environments; cartpole, irregular and a MiniGrid env are needed by the claims")
    steps: dict[str, int] = Field(description="environment steps per run, per env (equal for both algorithms)")
    eval_episodes: int = Field(ge=1, description="greedy evaluation episodes per run (gym envs)")
    gamma: float = Field(gt=0, le=1)
    gae_lambda: float = Field(ge=0, le=1)
    nn_encoding: Literal["onehot", "codes"] = Field(description="categorical features for the network: one-hot or raw integer codes")
    irregular: IrregularConfig
    gbrl: GBRLConfig
    nn: NNConfig

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if "cartpole" not in self.envs or "irregular" not in self.envs or not set(MINIGRID) & set(self.envs):
            raise ValueError("envs must include cartpole, irregular and at least one MiniGrid env (the claims use them)")
        for env in self.envs:
            if env not in self.steps:
                raise ValueError(f"steps has no entry for {env}")
            for name, cfg in (("gbrl", self.gbrl), ("nn", self.nn)):
                if self.steps[env] < cfg.n_envs * cfg.n_steps:
                    raise ValueError(f"steps.{env} is below one {name} rollout ({cfg.n_envs} x {cfg.n_steps})")
        return self


SMOKE = {"seeds": 1, "steps": {"cartpole": 1024, "minigrid_empty": 1024, "minigrid_doorkey": 1024, "irregular": 1024},
         "eval_episodes": 4}
