"""Per-seed records: what a paper's experiment measured, saved so that evaluation never retrains.

A paper's records are named tables (``{name: DataFrame}``), one row per (arm, seed, setting) with every
measured quantity as a column; every table has an integer ``seed`` column. On disk they are
``<dir>/<name>.parquet`` plus ``meta.json`` (the seeds, the key of the run that made them, its timings),
written to a scratch folder and swapped in whole, so an interrupted run leaves the previous records.

Records can grow: when a paper's experiment is seed-separable and the stored records were made by the same
code and params apart from the seed count, only the new seeds run and their rows are appended
(:func:`grow_plan`, :func:`merge_records`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from paperflows.core.io import atomic_write_json, replace_dir

META_FILE = "meta.json"


@dataclass
class Records:
    """``tables``: name -> DataFrame with an integer ``seed`` column; ``seeds``: the seeds they cover, in run
    order; ``meta``: the run's key (params without the seed count, code digest, smoke) and timings."""

    tables: dict[str, pd.DataFrame]
    seeds: list[int]
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise KeyError(f"no records table '{name}'; tables: {sorted(self.tables)}")
        return self.tables[name]


def check_tables(tables: Mapping[str, pd.DataFrame], seeds: Sequence[int], slug: str) -> None:
    """Every table is a DataFrame with an integer ``seed`` column whose values are among ``seeds``."""
    if not tables:
        raise ValueError(f"{slug}: the experiment returned no records tables")
    for name, table in tables.items():
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"{slug}: records table '{name}' is a {type(table).__name__}, not a DataFrame")
        if "seed" not in table.columns or not pd.api.types.is_integer_dtype(table["seed"]):
            raise ValueError(f"{slug}: records table '{name}' needs an integer 'seed' column")
        stray = sorted(set(table["seed"]) - set(seeds))
        if stray:
            raise ValueError(f"{slug}: records table '{name}' has rows for seeds {stray} that were not run")


def save_records(records: Records, folder: Path) -> None:
    """Write ``records`` to ``folder`` as a whole: the previous folder stays until the new one is complete."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.partial-"))
    try:
        for name, table in records.tables.items():
            table.reset_index(drop=True).to_parquet(staging / f"{name}.parquet", index=False)
        atomic_write_json(staging / META_FILE, {**records.meta, "seeds": list(records.seeds),
                                                "tables": sorted(records.tables)})
        staging.chmod(0o755)
        replace_dir(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_records(folder: Path) -> Records:
    """The records saved in ``folder``; a clear error when there are none (run the paper's records stage)."""
    folder = Path(folder)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"no records in {folder}: run the experiment first "
                                f"(`paperflows record {folder.name}` or `dvc repro {folder.name}`)")
    meta = json.loads(meta_path.read_text())
    tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in meta.pop("tables")}
    return Records(tables, list(meta.pop("seeds")), meta)


def merge_records(old: Records, new: Records, seeds: Sequence[int]) -> Records:
    """``old`` and ``new`` (disjoint seeds, same tables) as one set of records over ``seeds``, rows in seed
    order of ``seeds`` (stable within a seed)."""
    if set(old.tables) != set(new.tables):
        raise ValueError(f"cannot append records: tables {sorted(old.tables)} against {sorted(new.tables)}")
    rank = {seed: i for i, seed in enumerate(seeds)}
    tables = {}
    for name in old.tables:
        both = pd.concat([old.tables[name], new.tables[name]], ignore_index=True)
        order = both["seed"].map(rank)
        tables[name] = both.iloc[order.argsort(kind="stable")].reset_index(drop=True)
    return Records(tables, list(seeds), new.meta)


def select_seeds(records: Records, seeds: Sequence[int]) -> Records:
    """The rows of ``seeds`` only (a subset of the records' seeds)."""
    tables = {name: table[table["seed"].isin(seeds)].reset_index(drop=True) for name, table in records.tables.items()}
    return Records(tables, list(seeds), records.meta)


def grow_plan(stored: Records | None, key: dict[str, Any], seeds: Sequence[int], seed_separable: bool) -> list[int]:
    """The seeds that must run to have records over ``seeds``. Stored records made under the same ``key`` (params
    apart from the seed counts, code digest, kernel fingerprint, smoke) are reused as they are when they cover
    exactly ``seeds``, whatever the experiment (a change of ``seed_cap`` or of the common settings retrains
    nothing); a seed-separable experiment also keeps any stored seed and runs only those it lacks."""
    if stored is None or stored.meta.get("key") != key:
        return list(seeds)
    if list(stored.seeds) == list(seeds):
        return []
    if not seed_separable:
        return list(seeds)
    return [s for s in seeds if s not in set(stored.seeds)]
