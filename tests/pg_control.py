"""PostgreSQL clusters the outage tests may stop and start (scripts/pg_test_server.sh).

`private_cluster` gives a test module a cluster of its own (its own port and data folder, removed afterwards),
so stopping it for an outage disturbs no other test and the suite needs no serial phase. `controllable` is the
older way, for the benchmarks run by hand: the cluster in SPECBENCH_PG_DATA, only when it is the server
SPECBENCH_TEST_PG_URL points at (its postmaster.pid names the same port)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bench.host.processes import free_port

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


def has_server_binaries() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))


@contextlib.contextmanager
def private_cluster() -> Iterator[tuple[str, PgControl]]:
    """A throwaway cluster of one's own: (its URL, its controller). Skips without the server binaries, unless
    SPECBENCH_REQUIRE_PG=1 (CI), where that is a failure."""
    if not has_server_binaries():
        if os.environ.get("SPECBENCH_REQUIRE_PG") == "1":
            pytest.fail("SPECBENCH_REQUIRE_PG=1 but the PostgreSQL server binaries are not installed")
        pytest.skip("needs the PostgreSQL server binaries (Debian's postgresql package)")
    # Under /tmp, not pytest's tmp_path: the cluster belongs to the postgres user when tests run as root, and
    # pytest's folders are private to their owner.
    data = Path("/tmp") / f"specbench-pg-{uuid.uuid4().hex[:12]}"
    port = free_port()
    env = {**os.environ, "SPECBENCH_PG_PORT": str(port), "SPECBENCH_PG_DATA": str(data)}
    url = subprocess.run(
        ["bash", str(SCRIPT)], env=env, check=True, timeout=120, capture_output=True, text=True
    ).stdout.strip()
    ctl = PgControl(url, data)
    try:
        yield url, ctl
    finally:
        ctl.stop()
        shutil.rmtree(data, ignore_errors=True)
