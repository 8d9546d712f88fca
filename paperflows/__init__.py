"""paperflows: ICML 2025 papers reproduced as Prefect flows (CLI entry point: ``paperflows``)."""
