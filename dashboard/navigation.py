"""The dashboard's pages in menu order: what the router (`dashboard/app.py`) shows and what the server renders
once as it starts (`dashboard/warmup.py`). No Streamlit here, so the server can read it before it starts."""

from typing import NamedTuple


class PageSpec(NamedTuple):
    file: str  # relative to dashboard/
    title: str
    icon: str
    url_path: str  # "" for the default page


PAGES: tuple[PageSpec, ...] = (
    PageSpec("pages/overview.py", "Overview", ":material/dashboard:", ""),
    PageSpec("pages/trends.py", "Trends", ":material/show_chart:", "trends"),
    PageSpec("pages/sweep.py", "Sweep", ":material/grid_on:", "sweep"),
    PageSpec("pages/profiles.py", "Profiles", ":material/timeline:", "profiles"),
    PageSpec("pages/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    PageSpec("pages/shard_vs_tp.py", "Shard vs TP", ":material/lan:", "shard-vs-tp"),
    PageSpec("pages/jobs.py", "Jobs", ":material/work:", "jobs"),
)
