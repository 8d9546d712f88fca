"""Atomic file writes: an interrupted run leaves the previous file, never half of a new one."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def json_safe(value: Any) -> Any:
    """Make a nested structure strict-JSON serialisable: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps_json(value: Any) -> str:
    return json.dumps(json_safe(value), indent=2, sort_keys=True, allow_nan=False) + "\n"


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, dumps_json(value))


def replace_dir(staging: Path, final: Path) -> None:
    """Put the complete folder ``staging`` in place of ``final`` (the previous one is removed only once the new
    one is there): how a whole set of outputs is written atomically."""
    previous = final.with_name(f".{final.name}.previous")
    shutil.rmtree(previous, ignore_errors=True)
    if final.exists():
        final.rename(previous)
    staging.rename(final)
    shutil.rmtree(previous, ignore_errors=True)
