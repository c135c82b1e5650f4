"""Stop and start the throwaway PostgreSQL the tests use (scripts/pg_test_server.sh), to simulate outages.

Only the cluster in SPECBENCH_PG_DATA (the script's default otherwise) is touched, and only when it is the
server SPECBENCH_TEST_PG_URL points at (its postmaster.pid names the same port)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "pg_test_server.sh"


class PgControl:
    def __init__(self, url: str, data_dir: Path) -> None:
        self.port = make_url(url).port or 5432
        self.data_dir = data_dir

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPECBENCH_PG_PORT": str(self.port), "SPECBENCH_PG_DATA": str(self.data_dir)}

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=self._env(), check=True, timeout=60)

    def start(self) -> None:
        subprocess.run(["bash", str(SCRIPT)], env=self._env(), check=True, timeout=60, capture_output=True)


def controllable(url: str | None) -> PgControl | None:
    """A controller for the server behind `url`, or None if it is not the local throwaway cluster."""
    if not url:
        return None
    data = Path(os.environ.get("SPECBENCH_PG_DATA", "/tmp/specbench-pg"))
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    port = make_url(url).port or 5432
    if len(lines) < 4 or lines[3].strip() != str(port):
        return None
    return PgControl(url, data)
