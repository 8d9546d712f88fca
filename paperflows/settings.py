"""Environment set by the entry points before NumPy, SciPy, torch or Prefect is imported.

Two groups:

* :data:`PINNED` makes numeric primitives take the same kernels, so the same bits, on any x86-64 CPU with AVX2
  (``paperflows fingerprint`` shows it): OpenBLAS's Haswell kernels (NumPy, SciPy, scikit-learn), NumPy's own
  loops without their AVX-512 (X86_V4) versions (float64 ``exp``/``log1p`` differ there), torch's AVX2 kernels,
  oneDNN's AVX2 kernels (torch hands it GELU and the convolution backward pass, and it picks its instruction set
  itself), MKL's AVX2 conditional numerical reproducibility, and one BLAS/OpenMP thread per task (reductions
  split over threads sum in another order; the flows' parallelism is their seeds, in threads). Importing
  :mod:`paperflows` applies it, overriding what the shell says, unless ``PAPERFLOWS_UNPINNED=1``.
* :data:`DEFAULTS`: Prefect and matplotlib settings that a user's environment may override.
"""

from __future__ import annotations

import os
import sys
import warnings

UNPIN_VARIABLE = "PAPERFLOWS_UNPINNED"
PINNED = {
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_CBWR": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
NUMERIC_MODULES = ("numpy", "scipy", "torch", "sklearn")

DEFAULTS = {
    # Offline machines: Prefect's telemetry would only log errors; figures are written, never shown.
    # pyproject's [tool.prefect] says the same, but only where the working directory is the repo root.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "MPLBACKEND": "Agg",
    # Without PREFECT_API_URL each process starts a temporary server; on a loaded 2-core machine that
    # can take longer than Prefect's default 20 s.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # A flow run sends a heartbeat event this often; the server's zombie automation (paperflows.server)
    # marks a run Crashed when its heartbeats stop, so a killed run does not stay Running forever.
    "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30",
}


def pinning_wanted() -> bool:
    return os.environ.get(UNPIN_VARIABLE, "") not in ("1", "true", "yes")


def pin_numeric_kernels() -> None:
    """Set :data:`PINNED` (unless ``PAPERFLOWS_UNPINNED=1``); warn when a numeric library is already loaded,
    since it read its kernels at import and the pin cannot reach it any more."""
    if not pinning_wanted():
        return
    loaded = [name for name in NUMERIC_MODULES if name in sys.modules]
    changed = [key for key, value in PINNED.items() if os.environ.get(key) != value]
    os.environ.update(PINNED)
    if loaded and changed:
        warnings.warn(f"paperflows pins numeric kernels ({', '.join(changed)}) but {', '.join(loaded)} was imported "
                      "first: import paperflows before them (or set the variables in the shell) for the pinned bits",
                      RuntimeWarning, stacklevel=3)


def apply_environment_defaults() -> None:
    """Pin the numeric kernels, then set each default unless the user's environment already says otherwise."""
    pin_numeric_kernels()
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
