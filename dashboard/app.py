"""specbench dashboard: the router. Pages live in dashboard/pages; data access and charts live elsewhere."""

import streamlit as st

st.set_page_config(page_title="specbench", page_icon=":material/speed:", layout="wide")

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
