"""Params of the Wait-less OLP flow (``papers.waitless_olp`` in ``params.yaml``): typed, checked, light to import."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from paperflows.core.contract import Distinct, PaperParams

InstanceKind = Literal["uniform", "correlated"]   # official data types 1 and 2
FOMode = Literal["between", "ends"]               # where the wait-less first-order steps run
Rate = Literal["fixed", "remaining"]              # d of a first-order step: b / T or the remaining-budget rate
EtaSchedule = Literal["official", "sqrt_f"]       # wait-less first-order step sizes


class Params(PaperParams):
    horizons: Annotated[list[Annotated[int, Field(ge=10)]], Distinct] = Field(
        min_length=2, description="horizons T (customers), at least two for the slope")
    m: int = Field(ge=1, le=50, description="resources")
    instance: InstanceKind = Field(description="official data type 1 or 2")
    a_high: float = Field(gt=0, description="uniform instances: a_t ~ U[0, a_high]^m")
    r_high: float = Field(gt=0, description="uniform instances: r_t ~ U[0, r_high]")
    f_exponents: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        min_length=1, description="f = ceil(T^e); the first is the headline f")
    eta_scale: float = Field(gt=0, description="first-order baseline eta = eta_scale / sqrt(T)")
    fo_mode: FOMode = Field(description="where the wait-less first-order steps run")
    eta_schedule: EtaSchedule = Field(description="wait-less first-order step sizes")
    fo_rate: Rate = Field(description="d of the wait-less first-order step")
    lag: int = Field(ge=0, le=10, description="intervals before an LP price is used")
    timing_T: int = Field(ge=10, description="horizon of the LP-every-step timing comparison")
    timing_instances: int = Field(ge=1, description="instances timed (LP every step costs T solves each)")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.timing_instances > self.seeds:
            raise ValueError("timing_instances cannot exceed seeds")
        return self


SMOKE = {"seeds": 1, "horizons": [200, 500], "timing_T": 200, "timing_instances": 1}
