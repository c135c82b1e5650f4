"""`/metrics` with `--enable-metrics`: SGLang's counters (contract §4), per finished user request."""

from dataclasses import dataclass

COUNTERS = {
    "prompt_tokens": "Number of prefill tokens processed.",
    "generation_tokens": "Number of generation tokens processed.",
    "num_requests": "Number of requests processed.",
}


@dataclass
class Metrics:
    model_name: str
    prompt_tokens: int = 0
    generation_tokens: int = 0
    num_requests: int = 0

    def render(self) -> str:
        name = self.model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out = []
        for key, text in COUNTERS.items():
            out += [f"# HELP sglang:{key}_total {text}", f"# TYPE sglang:{key}_total counter"]
            out.append(f'sglang:{key}_total{{model_name="{name}"}} {float(getattr(self, key))}')
        return "\n".join(out) + "\n"
