"""The metric catalogue is the one place for a metric's facts: results, the ORM and the migration agree with it."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from sqlalchemy import inspect

from analysis.compare import compare_runs
from analysis.export import EXPORT_COLUMNS
from analysis.stats.compare import compare_samples
from bench import catalog
from bench.results import SampleMetrics
from db.migrate import open_database
from db.models import METRIC_FIELDS


def test_every_metric_is_in_results_orm_and_migration(sqlite_url: str) -> None:
    names = {m.name for m in catalog.METRICS}
    assert len(names) == len(catalog.METRICS), "a metric is listed twice"
    assert names == {f.name for f in dataclasses.fields(SampleMetrics)}
    assert names == set(METRIC_FIELDS)
    eng = open_database(sqlite_url)  # the Alembic migrations, not the models
    try:
        for table in ("points", "samples"):
            assert names <= {c["name"] for c in inspect(eng).get_columns(table)}, table
    finally:
        eng.dispose()


def test_every_metric_has_a_direction_label_and_unique_bench_serving_key() -> None:
    keys = [m.bench_serving for m in catalog.METRICS if m.bench_serving]
    assert len(keys) == len(set(keys))
    for m in catalog.METRICS:
        assert m.direction in ("higher", "lower") and m.label
    assert set(catalog.EXPORTED) <= set(EXPORT_COLUMNS)
    assert catalog.DEFAULT_METRIC in catalog.MENU


def test_direction_is_data_not_the_name_suffix() -> None:
    assert catalog.higher_is_better("max_output_tokens_per_s")  # ends in `_s`, but a throughput
    assert not catalog.higher_is_better("duration_s")
    assert not catalog.higher_is_better("tpot_p50_ms")
    with pytest.raises(KeyError, match="unknown metric"):
        catalog.get("tokens_per_dollar")


def test_fifty_percent_more_peak_throughput_is_an_improvement() -> None:
    base = [2000.0, 2010.0, 1990.0]
    c = compare_samples(base, [v * 1.5 for v in base], metric="max_output_tokens_per_s")
    assert c.verdict == "improvement" and c.delta == pytest.approx(0.5)
    # and through the run comparison the CLI and the Compare page use
    point = {"model": "m", "gpu_name": "none", "gpu_count": 0, "attention_backend": "fa3", "tp": 1}
    cfg = {**point, "algorithm": "EAGLE", "steps": 3, "topk": 1, "draft_tokens": 4, "spec_mode": "v2"}
    cfg |= {"batch_size": 8, "workload_key": "random:in1024:out512", "status": "ok", "fingerprint": "f"}
    pa = pd.DataFrame([{**cfg, "point_id": 1}])
    pb = pd.DataFrame([{**cfg, "point_id": 2}])
    sa = pd.DataFrame({"point_id": 1, "status": "ok", "max_output_tokens_per_s": base})
    sb = pd.DataFrame({"point_id": 2, "status": "ok", "max_output_tokens_per_s": [v * 1.5 for v in base]})
    table = compare_runs(pa, sa, pb, sb, metric="max_output_tokens_per_s")
    assert table["verdict"].tolist() == ["improvement"]
