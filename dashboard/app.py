"""specbench dashboard: the router. Pages live in dashboard/pages; data access and charts live elsewhere."""

import streamlit as st

# An emoji icon is drawn in the page itself; a Material one is fetched from Google's font servers by every
# viewer's browser, and no request leaves the dashboard (tests/dashboard/test_hostile_pages.py).
st.set_page_config(page_title="specbench", page_icon="⚡", layout="wide")

pages = [
    st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("pages/trends.py", title="Trends", icon=":material/show_chart:", url_path="trends"),
    st.Page("pages/sweep.py", title="Sweep", icon=":material/grid_on:", url_path="sweep"),
    st.Page("pages/profiles.py", title="Profiles", icon=":material/timeline:", url_path="profiles"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page("pages/shard_vs_tp.py", title="Shard vs TP", icon=":material/lan:", url_path="shard-vs-tp"),
    st.Page("pages/jobs.py", title="Jobs", icon=":material/work:", url_path="jobs"),
]
st.navigation(pages, position="sidebar").run()
