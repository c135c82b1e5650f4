"""bench_serving results in and out: `import-results` of a real bench_serving JSONL, `export --format
bench-serving-json`, and the round trip between them (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from bench import catalog
from bench.bench_serving_io import BenchServingFormatError, read_line
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, Run, Sample
from runners.cli import app
from tests.paths import FIXTURES

# Two lines written by sglang 0.5.13.post1's bench_serving (batch 4 and 16, 256 in / 256 out) against the
# stand-in, with server_info's model path renamed.
FIXTURE = FIXTURES / "bench_serving_results.jsonl"


def _cli(*argv: str) -> str:
    result = CliRunner().invoke(app, list(argv))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_import_keeps_what_the_file_knows(db_url: str) -> None:
    out = _cli("import-results", str(FIXTURE), "--db", db_url, "--gpu", "NVIDIA H200", "--gpu-count", "1")
    assert "as run 1" in out
    originals = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    engine = open_database(db_url)
    try:
        with session_scope(engine) as s:
            run = s.scalars(select(Run)).one()
            assert (run.backend, run.trigger, run.status) == ("imported", "import", "done")
            assert run.model == "/models/v3-slice" and run.simulated  # the stand-in's server_info says so
            assert (
                run.gpu_name == "NVIDIA H200" and run.sglang_version == originals[0]["server_info"]["version"]
            )
            points = list(s.scalars(select(Point).order_by(Point.id)))
            assert [p.batch_size for p in points] == [o["max_concurrency"] for o in originals]
            for p, o in zip(points, originals, strict=True):
                assert (p.input_len, p.output_len, p.num_prompts) == (256, 256, o["completed"])
                assert p.algorithm == "EAGLE" and p.steps == 3 and p.attention_backend == "flashmla"
                assert p.ttft_p50_ms == o["median_ttft_ms"] and p.itl_p95_ms == o["p95_itl_ms"]
                assert p.tpot_std_ms == o["std_tpot_ms"] and p.e2e_std_ms == o["std_e2e_latency_ms"]
                assert p.server_accept_length == o["accept_length"]
                assert p.output_throughput == o["output_throughput"]
            assert len(list(s.scalars(select(Sample)))) == 2
    finally:
        engine.dispose()
    # Importing the same file again adds nothing.
    assert "already imported as run 1" in _cli("import-results", str(FIXTURE), "--db", db_url)


def test_round_trip_through_export(db_url: str, tmp_path: Path) -> None:
    _cli("import-results", str(FIXTURE), "--db", db_url)
    exported = tmp_path / "out.jsonl"
    _cli("export", "--db", db_url, "--run", "1", "--format", "bench-serving-json", "-o", str(exported))
    originals = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    back = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(back) == len(originals)
    keys = {m.bench_serving for m in catalog.METRICS if m.bench_serving}
    for o, b in zip(originals, back, strict=True):
        for key in ("backend", "dataset_name", "max_concurrency", "random_input_len", "random_output_len"):
            assert b[key] == o[key], key
        assert math.isinf(b["request_rate"])
        compared = [k for k in keys if k in o]
        assert len(compared) >= 25  # every bench_serving metric the file has
        for key in compared:
            assert b[key] == pytest.approx(o[key], rel=1e-12), key
    # The export reads back as the same results: a second import of it keeps every number.
    url2 = f"sqlite:///{tmp_path / 'again.db'}"
    _cli("import-results", str(exported), "--db", url2)
    again = tmp_path / "again.jsonl"
    _cli("export", "--db", url2, "--format", "bench-serving-json", "-o", str(again))
    for a, b in zip(again.read_text().splitlines(), exported.read_text().splitlines(), strict=True):
        ja, jb = json.loads(a), json.loads(b)
        for key in keys:
            assert ja.get(key) == jb.get(key), key


def test_native_points_export_under_bench_serving_keys(sqlite_url: str) -> None:
    engine = open_database(sqlite_url)
    try:
        with session_scope(engine) as s:
            run = Run(sweep_name="s", sweep_yaml="", sweep_hash="h", backend="sim", model="m", status="done")
            s.add(run)
            s.flush()
            s.add(
                Point(
                    run_id=run.id,
                    point_key="k",
                    fingerprint="f",
                    status="ok",
                    model="m",
                    attention_backend="flashmla",
                    batch_size=8,
                    dataset="random",
                    input_len=128,
                    output_len=64,
                    num_prompts=32,
                    workload_key="w",
                    ttft_p50_ms=12.5,
                    itl_max_ms=9.0,
                    tpot_std_ms=0.25,
                    output_throughput=1000.0,
                    completed=32,
                    duration_s=2.0,
                )
            )
    finally:
        engine.dispose()
    (line,) = _cli("export", "--db", sqlite_url, "--format", "bench-serving-json").splitlines()
    got = json.loads(line)
    assert got["backend"] == "specbench" and got["max_concurrency"] == 8
    assert (got["random_input_len"], got["random_output_len"], got["random_range_ratio"]) == (128, 64, 1.0)
    assert got["median_ttft_ms"] == 12.5 and got["max_itl_ms"] == 9.0 and got["std_tpot_ms"] == 0.25
    assert got["output_throughput"] == 1000.0 and got["duration"] == 2.0 and got["p99_ttft_ms"] is None


def test_bad_input_is_a_clear_error(tmp_path: Path, sqlite_url: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    result = CliRunner().invoke(app, ["import-results", str(bad), "--db", sqlite_url])
    said = " ".join(result.output.split())  # the error console wraps long paths
    assert result.exit_code == 2 and "bad.jsonl:1" in said and "not a bench_serving result" in said
    with pytest.raises(BenchServingFormatError):
        read_line("not json")
    result = CliRunner().invoke(app, ["import-results", str(tmp_path / "missing.jsonl"), "--db", sqlite_url])
    assert result.exit_code == 2
