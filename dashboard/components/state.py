"""The view lives in the URL: JSON-safe query parameters only (strings and numbers, never pickles).
`restore` seeds a page's widgets from the URL once per session, `publish` writes them back, so the address bar
is always a shareable link. A value that fails to parse falls back to the default: a URL is user input."""

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

_RESTORED = "_url_state_restored"


@dataclass(frozen=True)
class Param:
    name: str  # in the URL
    key: str  # of the widget in st.session_state
    default: Any
    cast: Callable[[str], Any] = str


def parse(param: Param, raw: str | None) -> Any:
    if raw is None:
        return param.default
    try:
        return param.cast(raw)
    except (TypeError, ValueError):
        return param.default


def encode(value: Any) -> str | None:
    """A widget value as a query-string value, or None to leave it out of the URL."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float | str):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)  # JSON, never pickle


def restore(params: Iterable[Param], page: str) -> None:
    """Seed session state from the URL, once per page per session (later the widgets own their values)."""
    done: set[str] = st.session_state.setdefault(_RESTORED, set())
    if page in done:
        for p in params:
            st.session_state.setdefault(p.key, p.default)
        return
    for p in params:
        st.session_state[p.key] = parse(p, st.query_params.get(p.name))
    done.add(page)


def keep(params: Iterable[Param]) -> None:
    """Values of widgets drawn only sometimes (in a lazy expander, `dashboard.components.tables`): Streamlit
    drops a widget's value at the end of a run that did not draw it; set again here, the value is the page's
    own and outlives its widget. Call it before the widgets are drawn."""
    for p in params:
        if p.key in st.session_state:
            st.session_state[p.key] = st.session_state[p.key]


def ensure_choice(key: str, options: Sequence[Any], default: Any = None) -> None:
    """Before a selectbox is drawn: if its stored value is no longer an option, fall back to a valid one."""
    if not options:
        st.session_state.pop(key, None)
        return
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]


def publish(params: Iterable[Param]) -> None:
    """Mirror the widgets' current values into the URL."""
    values = {p.name: encode(st.session_state.get(p.key)) for p in params}
    current = {k: st.query_params.get(k) for k in st.query_params}
    wanted = {k: v for k, v in values.items() if v is not None}
    if current != wanted:
        st.query_params.from_dict(wanted)
