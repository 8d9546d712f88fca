"""Reusable pieces shared by the paper flows: the flow contract, data, training, statistics, claims, reporting."""

import os

# Offline machines: Prefect's telemetry would only log errors; figures are written, never shown.
# pyproject's [tool.prefect] says the same, but only where the working directory is the repo root.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("MPLBACKEND", "Agg")
# Without PREFECT_API_URL each process starts a temporary server; on a loaded 2-core machine that
# can take longer than Prefect's default 20 s.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
