"""Would averaging each AB with the following BA narrow a run's v2/v1 intervals? Prints, per v1/v2 cell, the
per-repeat paired interval (what specbench reports) next to the AB/BA block one.

A block (repeats 2k and 2k+1, measured A B B A) cancels any drift that is linear across its four windows; the
per-repeat pairs cancel only what is constant across two. If the spread were slow drift, blocks would be
tighter. docs/results/2026-12-04-h200-v3-slice-grid-part3.md reads this table for the H200 grid (they were not: windows jump between levels).

    .venv/bin/python -m benchmarks.abba_blocks --db sqlite:///examples/h200-v3slice-grid/grid.db --run 1
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

import pandas as pd

from analysis import windows
from bench.stats.tdist import t_quantile
from db.migrate import open_database_readonly

CELL = ("batch_size", "steps", "accept_length_pinned")


@dataclass(frozen=True)
class Spread:
    n: int
    sd: float  # of the log ratio, per pair
    half_width_pct: float  # of the 95% interval of the ratio


def _spread(values: list[float], scale: float = 1.0) -> Spread | None:
    """The 95% interval of the mean of `values` (log ratios); `scale` puts a block's SD on a pair's scale."""
    if len(values) < 2:
        return None
    sd = statistics.stdev(values)
    half = t_quantile(0.95, len(values) - 1) * sd / math.sqrt(len(values))
    return Spread(len(values), sd * scale, 100.0 * (math.exp(half) - 1.0))


def block_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cell of the windows view: pairs (n, SD, +-%) and AB/BA blocks (n, SD x sqrt 2, +-%). Only ok
    windows, and a repeat pairs only when one invocation measured both sides (as the v2-vs-v1 view does)."""
    ok = frame[(frame["status"] == "ok") & frame["spec_mode"].isin(["v1", "v2"])]
    rows = []
    for cell, group in ok.groupby(list(CELL), dropna=False):
        sides = {m: g.set_index("repeat") for m, g in group.groupby("spec_mode")}
        if set(sides) != {"v1", "v2"}:
            continue
        a, b = sides["v1"], sides["v2"]
        common = [r for r in a.index.intersection(b.index) if a.at[r, "invocation"] == b.at[r, "invocation"]]
        d = {r: math.log(b.at[r, "output_throughput"] / a.at[r, "output_throughput"]) for r in common}
        pairs = _spread(list(d.values()))
        blocks = _spread([(d[r] + d[r + 1]) / 2 for r in d if r % 2 == 0 and r + 1 in d], math.sqrt(2))
        if pairs is None:
            continue
        rows.append(
            {
                **dict(zip(CELL, cell, strict=True)),
                "pairs": pairs.n,
                "pair_sd": pairs.sd,
                "pair_pm_pct": pairs.half_width_pct,
                "blocks": blocks.n if blocks else 0,
                "block_sd": blocks.sd if blocks else math.nan,
                "block_pm_pct": blocks.half_width_pct if blocks else math.nan,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True, help="database URL")
    parser.add_argument("--run", type=int, required=True, help="run id")
    args = parser.parse_args()
    engine, note = open_database_readonly(args.db)  # a report never changes the file it reads
    if note:
        print(note)
    table = block_table(windows.load(engine, args.run))
    engine.dispose()
    with pd.option_context("display.width", 160, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
