"""Shard vs TP: does a one-GPU shard run predict its tensor-parallel deployment? (analysis.tp_compare)"""

import streamlit as st

from analysis import md
from analysis.tp_pair import PairRefused
from dashboard.components import layout, state
from dashboard.components.filters import run_picker
from dashboard.components.shard_vs_tp import shard_vs_tp_section
from dashboard.services import data

DEFAULT_SEARCH = 100
PARAMS = (state.Param("shard", "tp_shard", None, int), state.Param("tp", "tp_tp", None, int))

url = layout.page_start(
    "Shard vs TP",
    caption="A one-GPU shard of a model (tp 1) against the whole model at tensor parallelism N: step times, "
    "both v2/v1 verdicts, and the all-reduce time the shard leaves out.",
)
state.restore(PARAMS, "shard_vs_tp")

runs = data.run_choices(url)
ids = [int(i) for i in runs["id"]]
# The default pair is looked for among the newest runs only: a pair is measured together, not years apart.
pair = data.shard_tp_default(url, tuple(ids[:DEFAULT_SEARCH]))
if pair is None:
    st.info(
        "No shard/TP pair in this database: it needs a run of a model's one-GPU shard at tp 1 and a run of the "
        "whole model at `server.tp: N` (docs/guide/gpu-hosts.md, validating the shard). Pick two runs by hand "
        "to see why they do not pair.",
        icon=":material/info:",
    )
default_shard, default_tp = (ids.index(pair[0]), ids.index(pair[1])) if pair else (min(1, len(ids) - 1), 0)
c1, c2 = st.columns(2)
shard = run_picker(runs, "tp_shard", "Shard run (tp 1)", default_shard, c1)
tp = run_picker(runs, "tp_tp", "TP run (the whole model, tp N)", default_tp, c2)
state.publish(PARAMS)
if shard is None or tp is None:
    st.stop()
try:
    comparison = data.shard_vs_tp(url, shard, tp)
except PairRefused as e:
    head, _, rest = str(e).partition("\n")
    st.warning(md.text(head), icon=":material/block:")
    for line in rest.splitlines():
        st.markdown(f"- {md.text(line.removeprefix('- '))}")
    st.stop()
shard_vs_tp_section(comparison)
