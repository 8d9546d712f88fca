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
