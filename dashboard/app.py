"""specbench dashboard: the router. Pages live in dashboard/pages; data access and charts live elsewhere."""

from pathlib import Path

import streamlit as st

# The tab icon ships with the package: a Material or emoji icon here makes the browser fetch it from the
# internet (fonts.gstatic.com), which fails offline.
ICON = Path(__file__).with_name("assets") / "specbench.png"
st.set_page_config(page_title="specbench", page_icon=str(ICON), layout="wide")

pages = [
    st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("pages/trends.py", title="Trends", icon=":material/show_chart:", url_path="trends"),
    st.Page("pages/sweep.py", title="Sweep", icon=":material/grid_on:", url_path="sweep"),
    st.Page("pages/profiles.py", title="Profiles", icon=":material/timeline:", url_path="profiles"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/jobs.py", title="Jobs", icon=":material/work:", url_path="jobs"),
]
st.navigation(pages, position="sidebar").run()
