"""Params of the coser_gca flow (``papers.coser_gca`` in ``params.yaml``): typed, range-checked, light to import."""

from __future__ import annotations

from pydantic import Field, model_validator

from paperflows.core.contract import PaperParams


class Params(PaperParams):
    # the synthetic "books"
    train_books: int = Field(ge=2, description="books whose scenes train the persona models, the judge and the NSP")
    test_books: int = Field(ge=1, description="held-out books (new characters) whose scenes are simulated")
    characters_per_book: int = Field(ge=3, le=12, description="characters of a book (each with its own traits)")
    scenes_per_book: int = Field(ge=1, description="scenes (ground-truth dialogues) per book")
    scene_characters: int = Field(ge=2, le=5, description="major characters speaking in a scene (+ the Environment)")
    min_turns: int = Field(ge=7, description="fewest turns of a ground-truth dialogue (the decision sits at turns 4-5)")
    max_turns: int = Field(ge=7, description="most turns of a ground-truth dialogue")
    address_env_rate: float = Field(ge=0, le=0.5, description="chance that a character hands the word to the Environment")
    history_turns: int = Field(ge=1, le=8, description="past turns an agent sees (a window: the tiny model's context)")
    # the persona language models (tasks.lm GPT, word level)
    d_model: int = Field(ge=16, le=256, description="width of the GPT")
    n_layer: int = Field(ge=1, le=4, description="transformer blocks")
    n_head: int = Field(ge=1, le=8, description="attention heads")
    epochs: int = Field(ge=1, description="training epochs over the per-turn sequences")
    batch_size: int = Field(ge=1, description="sequences per AdamW step")
    lr: float = Field(gt=0, le=0.1, description="AdamW learning rate")
    # the GCA simulation (gca_evaluation/main.py)
    max_rounds: int = Field(ge=2, description="rounds of the simulation (official: 20)")
    end_min_round: int = Field(ge=0, description="<END CHAT> accepted only from this round on (official: 5)")
    continue_from: int = Field(ge=0, description="ground-truth rounds before the agents take over (official --continue_from)")
    temperature: float = Field(gt=0, le=2, description="sampling temperature of the character agents")
    max_new: int = Field(ge=4, le=40, description="most tokens of one generated turn")

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.max_turns < self.min_turns:
            raise ValueError("max_turns must be >= min_turns")
        if self.continue_from >= self.min_turns - 1:
            raise ValueError("continue_from must leave simulated rounds")
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        return self


SMOKE = {"seeds": 2, "train_books": 4, "test_books": 2, "scenes_per_book": 2, "epochs": 2, "max_rounds": 7}
