"""SGLang profiler traces (Chrome trace JSON from torch.profiler): read them and summarise speculative cycles.

Pure: no storage, no UI. `trace` reads the events, `summary` finds the cycles and computes their figures.
"""
