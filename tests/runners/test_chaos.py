"""The chaos bench's short version in CI: kill -9 of busy workers, a server killed mid-point, a 10-s database
outage and a flood of mutated sweeps, on the throwaway PostgreSQL; every figure must come out clean."""

from __future__ import annotations

import pytest

from benchmarks import chaos
from tests.pg_control import private_cluster

pytestmark = pytest.mark.slow


def test_quick_chaos_loses_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its own cluster: the bench stops the PostgreSQL it is given, which must not be the one other tests use.
    with private_cluster() as (url, ctl):
        monkeypatch.setenv("SPECBENCH_TEST_PG_URL", url)
        monkeypatch.setenv("SPECBENCH_PG_DATA", str(ctl.data_dir))
        monkeypatch.setenv("SPECBENCH_PG_PORT", str(ctl.port))
        code = chaos.main(["--quick"])
    out = capsys.readouterr().out
    assert code == 0 and "chaos: PASS" in out, out
