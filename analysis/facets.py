"""The Trends page's filter facets: one readable string column per facet over the series catalog."""

import pandas as pd

from analysis.labels import key_part, series_label, short_gpu, short_model, short_workload, spec_mode_key

# Filter facets of the Trends page: (column added by `annotate_catalog`, label shown to the user).
FACETS: tuple[tuple[str, str], ...] = (
    ("model_s", "Model"),
    ("gpu_s", "GPU"),
    ("backend_s", "Backend"),
    ("mode_s", "Spec mode"),
    ("steps_s", "Steps"),
    ("bs_s", "Batch size"),
    ("workload_s", "Workload"),
)


def annotate_catalog(catalog: pd.DataFrame) -> pd.DataFrame:
    """The series catalog with one readable string column per filter facet, and a full label."""
    c = catalog.copy()
    if c.empty:
        for col in (*(col for col, _ in FACETS), "label"):
            c[col] = pd.Series(dtype=str)
        return c
    c["model_s"] = [short_model(m) for m in c["model"]]
    c["gpu_s"] = [short_gpu(n, k) for n, k in zip(c["gpu_name"], c["gpu_count"], strict=True)]
    c["backend_s"] = c["attention_backend"].astype(str)
    c["mode_s"] = c["spec_mode"].map(spec_mode_key)
    c["steps_s"] = [key_part(s) or "none" for s in c["steps"]]
    c["bs_s"] = [str(int(b)) for b in c["batch_size"]]
    c["workload_s"] = [short_workload(w) for w in c["workload_key"]]
    c["label"] = [series_label(r) for r in c.to_dict("records")]
    return c


def facet_options(values: pd.Series) -> list[str]:
    """Distinct facet values in a natural order (numbers numerically, `baseline`/`none` first)."""

    def key(v: str) -> tuple[int, float, str]:
        if v in ("baseline", "none"):
            return (0, 0.0, v)
        try:
            return (1, float(v), v)
        except ValueError:
            return (2, 0.0, v)

    return sorted({str(v) for v in values.dropna()}, key=key)


def default_series(catalog: pd.DataFrame, changes: pd.DataFrame | None = None) -> str | None:
    """The series a first visit to Trends opens on: the newest flagged regression (the Overview's first),
    else the longest history (most points, then the most recent), never a single dot."""
    if catalog.empty:
        return None
    known = set(catalog["fingerprint"])
    if changes is not None and not changes.empty:
        hits = changes[changes["fingerprint"].isin(known)]
        if "direction" in hits:
            hits = hits[hits["direction"] == "regression"]
        if not hits.empty:
            newest = hits.sort_values("started_at", ascending=False, kind="stable")
            return str(newest.iloc[0]["fingerprint"])
    ranked = catalog.sort_values(["n_points", "last_at"], ascending=[False, False], kind="stable")
    return str(ranked.iloc[0]["fingerprint"])
