"""SGLang profiler traces (torch.profiler Chrome JSON), pure: `trace` reads events, `summary` finds cycles."""
