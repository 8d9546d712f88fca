"""Domain toolkits shared by the paper flows: data, training, language models, diffusion, graphs, two-sample
tests and the like.

The name: these modules predate the framework core's move to :mod:`paperflows.core` and every paper plan calls
them ``tasks/``; they are plain functions, never Prefect tasks (those are made only by
:mod:`paperflows.core.experiment`), and Prefect's own ``prefect.tasks`` never shares the top-level name.
A library: it imports only :mod:`paperflows.core` of ours (never ``flows/`` or the rest of ``paperflows/``),
and importing it sets nothing but the numeric kernel pins that importing :mod:`paperflows` sets.
"""

import paperflows.core  # noqa: F401  (pins the numeric kernels before a toolkit loads NumPy or torch)
