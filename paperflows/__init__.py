"""paperflows: ICML 2025 papers reproduced as Prefect flows (CLI entry point: ``paperflows``).

Importing the package pins the numeric kernels (:mod:`paperflows.settings`) before NumPy or torch can load.
"""

from paperflows.settings import pin_numeric_kernels

pin_numeric_kernels()
