"""Run `streamlit run dashboard/app.py ...` in-process, with st.navigation in charge from the first request.

Streamlit still carries its first multipage mechanism: when the entry script has a sibling `pages/` folder it
starts in that legacy mode, and a first visit to /trends runs pages/trends.py on its own, skipping the
router (no navigation menu, no page config) until some session happens to run app.py. Our page files live
in dashboard/pages, so we switch the legacy mode off before the server starts. The flag is internal; if a
Streamlit release drops it, the import fails quietly and only that first-visit quirk returns.
"""

from __future__ import annotations

import gc
import importlib
import sys

# What every page imports, loaded once before the server answers: the first visit to a page then runs its
# script, not seconds of imports (pandas, Altair, the analysis modules). Modules that declare Streamlit caches
# (services, components) are left to the pages: their decorators want the running server.
WARM_MODULES = (
    "pandas",
    "altair",
    "dashboard.charts",
    "dashboard.profile_charts",
    "analysis.changes",
    "analysis.comparability",
    "analysis.facets",
    "analysis.profiles",
    "analysis.regressions",
    "analysis.report",
    "analysis.sweep",
    "analysis.trace_files",
    "analysis.v2_vs_v1",
    "bench.profile.overlap",
    "bench.profile.summary",
    "db.profile_queries",
    "db.queue_queries",
    # found by running every page once after the list above: what a first visit still imported
    "analysis.floors",
    "analysis.jobs",
    "analysis.run_counts",
    "analysis.tp_compare",
    "analysis.tp_pair",
    "bench.floor",
    "bench.host.gpus",
    "bench.model_config",
    "dashboard.charts.speedup",
    "dashboard.charts.tp",
    "db.engine",
    "narwhals._pandas_like.dataframe",  # Altair's data conversion
    "pandas.io.formats.csvs",  # the pages' CSV downloads
    "pyarrow.pandas_compat",  # st.dataframe's Arrow serialisation
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql.psycopg",
    "streamlit.dataframe.lazy_df_adapters",
)


def warm_imports() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)


def skip_chart_validation() -> None:
    """Altair checks every chart against the Vega-Lite JSON schema as it is built and again as Streamlit
    serialises it: 1-2 s of a page's script on a loaded host. The builders are pure functions whose specs
    the tests validate (tests/dashboard/test_charts.py builds them in a process without this), so the server
    skips it."""
    import functools

    import altair as alt
    from altair.utils import schemapi

    schemapi.disable_debug_mode()  # no validation when a chart object is created
    to_dict = alt.TopLevelMixin.to_dict

    @functools.wraps(to_dict)
    def unvalidated(self: alt.TopLevelMixin, validate: bool = True, **kwargs: object) -> dict[str, object]:
        return to_dict(self, False, **kwargs)  # type: ignore[arg-type]

    alt.TopLevelMixin.to_dict = unvalidated  # type: ignore[method-assign]


def warm_charts() -> None:
    """Build and serialise one chart that uses what the pages use (layers, facets, conditions, fixed values):
    Altair fills its lookup tables on first use, which would otherwise land on the first page a user opens."""
    import altair as alt
    import pandas as pd

    from dashboard.charts.style import value_if

    frame = pd.DataFrame({"x": [1, 2], "y": [1.0, 2.0], "k": ["a", "b"], "on": [True, False]})
    base = alt.Chart(frame).encode(x=alt.X("x:O"), y=alt.Y("y:Q"), color=alt.Color("k:N", scale=None))
    rule = base.mark_rule().encode(
        strokeDash=value_if(alt.StrokeDashValue, "datum.on", [5, 4], [1, 0]), tooltip=[alt.Tooltip("k:N")]
    )
    text = base.mark_text().encode(text=alt.Text("y:Q", format=".2f"), color=alt.ColorValue("black"))
    alt.layer(rule, text, data=frame).facet(column=alt.Column("k:N")).to_dict()


def warm_streamlit() -> None:
    """What Streamlit itself does on the first script run of a process, done before the first visitor:
    the emoji table behind the page icon and the Material icon names behind the page links (0.1-0.2 s of
    imports and regexes), and the check for a Python REPL that it makes before the first element (it reads
    the source of every frame on the stack). We run under `streamlit run`, which that check exists to detect
    the absence of."""
    importlib.import_module("streamlit.emojis")
    importlib.import_module("streamlit.material_icon_names")
    from streamlit import delta_generator

    if hasattr(delta_generator, "_use_warning_has_been_displayed"):
        delta_generator._use_warning_has_been_displayed = True


def freeze_heap() -> None:
    """Move everything loaded so far out of the garbage collector's reach. With pandas, Altair and the
    analysis modules loaded a full collection walks some 180,000 objects: 0.2-0.4 s on a loaded 2-core host,
    holding the interpreter lock while a page's messages wait to be sent. Streamlit ran one after every script
    run (`runner.postScriptGC`, which `specbench dashboard` now turns off), and Python runs one now and then.
    Modules and their tables live as long as the server, so the collector need never look at them again; what
    pages allocate is still collected."""
    gc.collect()
    gc.freeze()


def main(argv: list[str]) -> None:
    warm_imports()
    skip_chart_validation()
    warm_charts()
    warm_streamlit()
    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
    except ImportError:  # pragma: no cover - depends on the Streamlit release
        pass
    from streamlit.web import cli

    from dashboard import warmup

    warmup.gate_health(warmup.start(argv))
    freeze_heap()
    sys.argv = ["streamlit", *argv]
    cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
