"""Environment defaults, set by the entry points (the CLI, the test suite) before Prefect is imported."""

from __future__ import annotations

import os

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


def apply_environment_defaults() -> None:
    """Set each default unless the user's environment already says otherwise."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
