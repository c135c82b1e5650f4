"""specbench dashboard: the router. Pages live in dashboard/pages; data access and charts live elsewhere."""

import streamlit as st

from dashboard.navigation import PAGES

# An emoji icon is drawn in the page itself; a Material one is fetched from Google's font servers by every
# viewer's browser, and no request leaves the dashboard (tests/dashboard/test_hostile_pages.py).
st.set_page_config(page_title="specbench", page_icon="⚡", layout="wide")

pages = [
    st.Page(p.file, title=p.title, icon=p.icon, url_path=p.url_path or None, default=not p.url_path)
    for p in PAGES
]
st.navigation(pages, position="sidebar").run()
