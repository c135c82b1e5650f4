"""What the chart pages draw, built once per selection and database version and shared by every visitor:
building a page's frames and Altair charts took most of its script time; a visit now reads them from the cache
and only serialises the charts. What these return is shared between sessions: read it, never change it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.floors import floor_rows
from analysis.stats.changepoint import ChangePointParams
from analysis.sweep import sweep_grid
from bench.catalog import higher_is_better
from dashboard import charts
from dashboard.charts.speedup import floor_lines, speedup_lines
from dashboard.services import data


@dataclass(frozen=True)
class SweepView:
    """What the Sweep page draws for one selection."""

    selection: pd.DataFrame  # the run's points of the chosen workload, topk and pinned acceptance
    grid: pd.DataFrame  # `analysis.sweep.sweep_grid` of the selection (ok points)
    ratios: pd.DataFrame  # v2/v1 cells of the selection (`analysis.v2_vs_v1`)
    over_baseline: pd.DataFrame  # speculative cells over the baseline (`analysis.spec_vs_baseline`)
    floors: pd.DataFrame  # `analysis.floors.floor_rows` of the selection
    charts: dict[str, charts.AnyChart] = field(default_factory=dict)  # by name; absent: nothing to draw

    @property
    def spec(self) -> pd.DataFrame:
        return self.grid[self.grid["spec_mode"] != "baseline"]


def select(
    points: pd.DataFrame, workload: str | None, topk: int | None, accept: float | None
) -> pd.DataFrame:
    """The points of one workload, eagle topk and pinned acceptance (the baseline, having neither, stays)."""
    sel = _cells(points, workload, topk, None)
    if accept is not None:
        sel = sel[sel["accept_length_pinned"].isna() | (sel["accept_length_pinned"] == accept)]
    return sel


def _cells(frame: pd.DataFrame, workload: str | None, topk: int | None, accept: float | None) -> pd.DataFrame:
    """The cells of a ratio view (v2/v1, spec/baseline) of one workload, eagle topk and pinned acceptance."""
    frame = frame[frame["workload_key"] == workload]
    if topk is not None:
        frame = frame[frame["topk"].isna() | (frame["topk"] == topk)]
    if accept is not None:
        frame = frame[frame["accept_length"] == accept]
    return frame


@data.cached(shared=True)
def sweep_view(
    url: str, run_id: int, workload: str | None, topk: int | None, accept: float | None
) -> SweepView:
    sel = select(data.run_points(url, run_id), workload, topk, accept)
    grid = sweep_grid(sel)
    ratios = _cells(data.run_v2_vs_v1(url, run_id), workload, topk, accept)
    over = _cells(data.run_spec_vs_baseline(url, run_id), workload, topk, accept)
    view = SweepView(selection=sel, grid=grid, ratios=ratios, over_baseline=over, floors=floor_rows(sel))
    built = view.charts
    if not view.floors.empty:
        built["floor"] = floor_lines(view.floors)
    if grid.empty:
        return view
    spec = view.spec
    built["throughput"] = charts.heatmap(spec, "output_throughput", "tok/s", width=330, strike_wrong=True)
    built["acceptance"] = charts.heatmap(spec, "accept_length", "tokens", fmt=".2f", width=330)
    if spec["speedup_over_baseline"].notna().any():
        built["speedup"] = charts.heatmap(
            spec, "speedup_over_baseline", "×", fmt=".2f", diverging=True, width=330, strike_wrong=True
        )
        built["speedup_lines"] = speedup_lines(grid)
    if ratios["ratio"].notna().any():
        built["ratio"] = charts.ratio_heatmap(ratios)
    built["lines"] = charts.throughput_lines(grid)
    return view


@data.cached(shared=True)
def trend_chart(
    url: str, fingerprint: str, metric: str, x_mode: charts.XMode, params: ChangePointParams
) -> charts.AnyChart:
    """One series of `metric` on the x-axis `x_mode`, with its change points at `params` (Trends)."""
    series = data.series_points(url, fingerprint, metric)
    band = None
    if metric != "output_throughput":  # only throughput has a stored interval; others show the repeats' range
        band = data.sample_band(url, tuple(int(i) for i in series["point_id"]), metric)
    frame = charts.trend_frame(series, metric, x_mode, band)
    return charts.trend_chart(frame, metric, x_mode, data.series_changes(url, fingerprint, metric, params))


data.TRIAGE_VIEWS.append(trend_chart)  # its rules are coloured by triage state


@data.cached(shared=True)
def compare_charts(
    url: str, a: int, b: int, metric: str, threshold: float, confidence: float
) -> tuple[charts.AnyChart, charts.AnyChart]:
    """Compare's grid of Δ per point and its forest of intervals for run B against run A."""
    table = data.comparison(url, a, b, metric, threshold, confidence)
    return charts.compare_grid(table, higher_is_better(metric)), charts.compare_forest(table, threshold)


def clear() -> None:
    """Forget every built view (with `st.cache_data.clear()`, a cold start for benchmarks)."""
    for fn in (sweep_view, trend_chart, compare_charts):
        fn.clear()
