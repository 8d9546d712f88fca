"""The framework core every paper builds on: the flow contract, seeds, the experiment and its per-seed records,
estimates and their intervals, claims, verdicts and reports.

Papers (``flows/``) and the domain toolkits (``tasks/``) import it; it imports nothing of theirs, nor the rest
of :mod:`paperflows` (the application: CLI, stages, scale-out, summary). Importing it runs
``paperflows/__init__.py``, which pins the numeric kernels before NumPy or torch can load.
"""
