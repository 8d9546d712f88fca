"""One local Prefect server shared by every stage of a run (a temporary server per process costs ~10 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HOST, PORT = "127.0.0.1", 4200
ZOMBIE_AUTOMATION = "paperflows: crash runs whose heartbeats stopped"
MISSED_HEARTBEATS = 3  # a run is a zombie after this many heartbeat periods without news
API_URL = f"http://{HOST}:{PORT}/api"
UI_URL = f"http://{HOST}:{PORT}"
STATE_DIR = Path(".paperflows")


def is_up(api_url: str = API_URL, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def start(wait_s: float = 90.0) -> str:
    """Start ``prefect server start`` in the background unless one answers already; returns the UI address."""
    if is_up():
        ensure_zombie_automation()
        return UI_URL
    STATE_DIR.mkdir(exist_ok=True)
    log = open(STATE_DIR / "server.log", "ab")
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    process = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", HOST, "--port", str(PORT)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    (STATE_DIR / "server.pid").write_text(str(process.pid))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prefect server exited with code {process.returncode}; see {STATE_DIR / 'server.log'}")
        if is_up():
            ensure_zombie_automation()
            return UI_URL
        time.sleep(0.5)
    raise RuntimeError(f"prefect server did not answer within {wait_s:.0f} s; see {STATE_DIR / 'server.log'}")


def stop() -> bool:
    """Stop the server this project started; returns whether one was running."""
    pid_file = STATE_DIR / "server.pid"
    if not pid_file.is_file():
        return False
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def zombie_automation(heartbeat_s: int):
    """Prefect's documented answer to runs left "Running" by a killed process: every flow run sends a
    heartbeat event (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, set in :mod:`paperflows.settings`); this
    proactive automation marks a run Crashed when, after a heartbeat, neither another heartbeat nor a
    final state arrives within ``MISSED_HEARTBEATS`` periods."""
    from datetime import timedelta

    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    return Automation(
        name=ZOMBIE_AUTOMATION,
        description="A paperflows run whose process died stops sending heartbeats; mark it Crashed.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Failed",
                    "prefect.flow-run.Cancelled", "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=MISSED_HEARTBEATS * heartbeat_s),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED,
                                    message=f"No heartbeat for {MISSED_HEARTBEATS * heartbeat_s} s: the process died.")],
    )


def ensure_zombie_automation(api_url: str = API_URL) -> bool:
    """Create the zombie automation on the server at ``api_url`` unless it exists; returns whether it was created."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from paperflows.settings import DEFAULTS

    heartbeat_s = int(os.environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", DEFAULTS["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"]))
    with temporary_settings({PREFECT_API_URL: api_url}):
        from prefect.automations import Automation

        try:
            Automation.read(name=ZOMBIE_AUTOMATION)
            return False
        except ValueError:
            zombie_automation(heartbeat_s).create()
            return True
