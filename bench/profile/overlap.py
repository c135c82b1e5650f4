"""v1 against v2 of the same point, from their profile summaries: how much CPU work the overlap hides. Without
overlap the GPU idles while the CPU prepares the next step; with it the CPU works during the previous step:

    cpu_hidden_ms = gpu_idle_ms_per_cycle(v1) - gpu_idle_ms_per_cycle(v2)
    overlap_share = cpu_hidden_ms / gpu_idle_ms_per_cycle(v1)

1 (100 %) hides everything overlap could; negative when v2's GPU idles longer than v1's."""

from typing import Any


def _median(summary: dict[str, Any], key: str) -> float | None:
    st = summary.get(key)
    return float(st["median"]) if isinstance(st, dict) and st.get("median") is not None else None


def overlap_figures(v1: dict[str, Any], v2: dict[str, Any]) -> dict[str, float | None]:
    """The overlap columns of a v2-vs-v1 comparison (medians per cycle, ms)."""
    idle1, idle2 = _median(v1, "gpu_idle_ms_per_cycle"), _median(v2, "gpu_idle_ms_per_cycle")
    cyc1, cyc2 = _median(v1, "cycle_ms"), _median(v2, "cycle_ms")
    busy1, busy2 = _median(v1, "gpu_busy_fraction"), _median(v2, "gpu_busy_fraction")
    return {
        "gpu_idle_ms_v1": idle1,
        "gpu_idle_ms_v2": idle2,
        "cpu_hidden_ms": idle1 - idle2 if idle1 is not None and idle2 is not None else None,
        "overlap_share": overlap_share(idle1, idle2),
        "cycle_ms_v1": cyc1,
        "cycle_ms_v2": cyc2,
        "gpu_busy_v1": busy1,
        "gpu_busy_v2": busy2,
    }


def overlap_share(idle_v1_ms: float | None, idle_v2_ms: float | None) -> float | None:
    """The share of v1's GPU idle per cycle that v2 removes (1 = all of it); None without a v1 idle time."""
    if idle_v1_ms is None or idle_v2_ms is None or idle_v1_ms <= 0:
        return None
    return (idle_v1_ms - idle_v2_ms) / idle_v1_ms


def share_text(share: float | None) -> str:
    """ "v2 hides 83% of what overlap could hide", or why it hides none of it."""
    if share is None:
        return "overlap share unknown (no GPU idle time in v1's profile)"
    if share >= 0:
        return f"v2 hides {share:.0%} of what overlap could hide"
    return f"v2 hides none of what overlap could hide (its GPU idles {-share:.0%} longer per cycle than v1's)"


def verdict(v1: dict[str, Any], v2: dict[str, Any]) -> str:
    """One line, e.g. "v2 hides 3.1 ms of CPU per cycle; GPU idle per cycle 5.2 → 2.0 ms; ..."."""
    f = overlap_figures(v1, v2)
    if f["cpu_hidden_ms"] is None:
        return "no GPU kernels in one of the traces: cannot tell how much CPU work v2 hides"
    hidden = f["cpu_hidden_ms"]
    head = (
        f"v2 hides {hidden:.2f} ms of CPU per cycle"
        if hidden > 0
        else f"v2 hides no CPU work (GPU idle per cycle {-hidden:.2f} ms longer than v1)"
    )
    parts = [head, f"GPU idle per cycle {f['gpu_idle_ms_v1']:.2f} → {f['gpu_idle_ms_v2']:.2f} ms"]
    if f["cycle_ms_v1"] and f["cycle_ms_v2"] is not None:
        change = (f["cycle_ms_v2"] / f["cycle_ms_v1"] - 1.0) * 100.0
        parts.append(f"cycle {f['cycle_ms_v1']:.2f} → {f['cycle_ms_v2']:.2f} ms ({change:+.1f}%)")
    parts.append(share_text(f["overlap_share"]))
    return "; ".join(parts)
