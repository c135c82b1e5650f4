"""The chaos bench's short version in CI: kill -9 of busy workers, a server killed mid-point, a 10-s database
outage and a flood of mutated sweeps, on the throwaway PostgreSQL; every figure must come out clean."""

from __future__ import annotations

import os

import pytest

from benchmarks import chaos
from tests.pg_control import controllable

pytestmark = [pytest.mark.slow, pytest.mark.exclusive]  # it stops the shared PostgreSQL


def test_quick_chaos_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    if controllable(os.environ.get("SPECBENCH_TEST_PG_URL")) is None:
        if os.environ.get("SPECBENCH_REQUIRE_PG") == "1":
            pytest.fail(
                "SPECBENCH_REQUIRE_PG=1 but the throwaway PostgreSQL cannot be stopped and started here"
            )
        pytest.skip("needs the local throwaway PostgreSQL (scripts/pg_test_server.sh)")
    code = chaos.main(["--quick"])
    out = capsys.readouterr().out
    assert code == 0 and "chaos: PASS" in out, out
