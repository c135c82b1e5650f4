"""Run `streamlit run dashboard/app.py ...` in this process, with st.navigation in charge from the first request.

Streamlit still carries its first multipage mechanism: when the entry script has a sibling `pages/` folder it
starts in that legacy mode, and a first visit to /trends runs pages/trends.py on its own, skipping the
router (no navigation menu, no page config) until some session happens to run app.py. Our page files live
in dashboard/pages, so we switch the legacy mode off before the server starts. The flag is internal; if a
Streamlit release drops it, the import fails quietly and only that first-visit quirk returns.
"""

from __future__ import annotations

import sys

# What every page imports, loaded once before the server answers: the first visit to a page then runs its
# script, not seconds of imports (pandas, Altair, the analysis modules).
WARM_MODULES = (
    "pandas",
    "altair",
    "dashboard.charts",
    "dashboard.components.filters",
    "dashboard.components.layout",
    "dashboard.components.triage",
    "dashboard.components.export",
    "dashboard.profile_charts",
    "dashboard.services.data",
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
)


def warm_imports() -> None:
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)


def main(argv: list[str]) -> None:
    warm_imports()
    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
    except ImportError:  # pragma: no cover - depends on the Streamlit release
        pass
    from streamlit.web import cli

    sys.argv = ["streamlit", *argv]
    cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
