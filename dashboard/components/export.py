"""Download buttons: CSV for spreadsheets, Markdown for a PR comment."""

from __future__ import annotations

import streamlit as st


def download_buttons(csv_text: str, markdown_text: str | None, base_name: str, key: str) -> None:
    cols = st.columns(2 if markdown_text is not None else 1)
    cols[0].download_button(
        "Download CSV",
        csv_text,
        file_name=f"{base_name}.csv",
        mime="text/csv",
        key=f"{key}_csv",
        on_click="ignore",
        icon=":material/table:",
        width="stretch",
    )
    if markdown_text is not None:
        cols[1].download_button(
            "Download Markdown (PR comment)",
            markdown_text,
            file_name=f"{base_name}.md",
            mime="text/markdown",
            key=f"{key}_md",
            on_click="ignore",
            icon=":material/description:",
            width="stretch",
        )
