"""Download buttons: CSV for spreadsheets, Markdown for a PR comment."""

import pandas as pd
import streamlit as st

from analysis.render import csv_text


def download_buttons(csv_text: str, markdown_text: str | None, base_name: str, key: str) -> None:
    files = [("Download CSV", csv_text, "csv", "text/csv", ":material/table:")]
    if markdown_text is not None:
        files.append(
            ("Download Markdown (PR comment)", markdown_text, "md", "text/markdown", ":material/description:")
        )
    for col, (label, text, ext, mime, icon) in zip(st.columns(len(files)), files, strict=True):
        col.download_button(
            label,
            text,
            file_name=f"{base_name}.{ext}",
            mime=mime,
            key=f"{key}_{ext}",
            on_click="ignore",
            icon=icon,
            width="stretch",
        )


def frame_with_csv(frame: pd.DataFrame, what: str, file_name: str, key: str) -> None:
    """The frame as a table and a `Download <what> CSV` button. The CSV goes with the page: a deferred
    download's second round trip left a click on a loaded host without a file for over a minute."""
    st.dataframe(frame, hide_index=True)
    st.download_button(
        f"Download {what} CSV",
        csv_text(frame, float_format=None),
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        key=key,
    )
