"""Params of the place-field flow (``papers.placefield_td`` in ``params.yaml``): typed, checked, light to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    n_fields: int = Field(ge=2, le=1024, description="place fields N")
    sigma0: float = Field(gt=0, description="initial field width")
    alpha0: float = Field(gt=0, description="initial field amplitude (peak activity alpha0**2)")
    beta: float = Field(gt=0, description="actor softmax inverse temperature")
    gamma: float = Field(gt=0, lt=1, description="discount")
    eta_actor: float = Field(ge=0)
    eta_critic: float = Field(ge=0)
    eta_center: float = Field(ge=0, description="field centre learning rate (learned conditions)")
    eta_width: float = Field(ge=0)
    eta_amp: float = Field(ge=0)
    start: float = Field(ge=-1, le=1)
    goals: list[Annotated[float, Field(ge=-1, le=1)]] = Field(min_length=2, max_length=2,
                                                            description="first goal, then the moved goal")
    goal_size: float = Field(gt=0, description="s.d. of the Gaussian reward")
    max_reward: float = Field(gt=0, description="reward collected before an episode ends")
    t_max: int = Field(ge=10, description="maximum steps per episode")
    episodes_per_goal: int = Field(ge=20, description="episodes before the goal moves (and after)")
    drift_noise: float = Field(ge=0, description="s.d. of the noise on lambda, sigma, alpha per step")
    criterion_window: int = Field(ge=1, description="episodes averaged by the learning criterion")
    criterion_latency: float = Field(gt=0, description="criterion: window-mean latency below this")
    density_radius: float = Field(gt=0, description="centres within +-radius of the goal count")
    late_fraction: float = Field(gt=0, le=0.5, description="final fraction of a block for 'late' latency")
    curve_bin: int = Field(ge=1, description="episodes per point of the latency curves")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.criterion_window > self.episodes_per_goal:
            raise ValueError("criterion_window cannot exceed episodes_per_goal")
        if abs(self.start - self.goals[0]) <= self.goal_size:
            raise ValueError("the first goal must not sit on the start")
        return self


SMOKE = {"seeds": 2, "episodes_per_goal": 40, "curve_bin": 10}
