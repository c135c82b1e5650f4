"""Cached data access for the pages: `st.cache_data` around `db.queries` and `analysis`."""
