"""What a page draws on its first view, and what waits for a click. A first visit pays the browser for every
kind of element on the page (its JavaScript chunk, loaded and run) and for every element drawn: so small
tables are Markdown, drawn by the code every page has already loaded, where Streamlit's data grid loads about
1.2 MB of JavaScript and paints on a canvas; and a section a reader opens only sometimes sits in a lazy
expander, whose content the server sends only once it is open."""

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from analysis.render import Column, md_table

ROWS = 30  # a Markdown table's most rows; a longer one shows its first rows and the whole in a grid on demand


def table(
    frame: pd.DataFrame, cols: Sequence[Column], *, key: str, what: str = "rows", rows: int = ROWS
) -> None:
    """`frame` as a Markdown table of `cols` (cells through analysis.render: user text escaped); past `rows`
    rows, the first ones and, in a lazy expander, all of them in a data grid."""
    records = frame.to_dict("records")
    st.markdown("\n".join(md_table(records[:rows], cols)))
    if len(records) > rows:
        box = lazy_expander(f"All {len(records):,} {what}", key=key)
        if box is not None:
            box.dataframe(frame, hide_index=True)


def lazy_expander(label: str, key: str, *, expanded: bool = False) -> Any:
    """An expander whose content is drawn only while it is open: the container when open, else None. Opening
    it reruns the page; `key` holds its state (`st.session_state[key] = True` opens it)."""
    box = st.expander(label, expanded=expanded, key=key, on_change="rerun")
    return box if box.open else None
