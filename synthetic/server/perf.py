"""One scheduler iteration's milliseconds (docs/reference/stand-in.md): GPU + CPU, or with overlap the max."""

from dataclasses import dataclass

from synthetic.server.config import PerfParams


@dataclass(frozen=True)
class DecodeSplit:
    target_ms: float
    draft_ms: float
    draft_extend_ms: float
    cpu_ms: float
    # The part of target_ms that is TP communication; the profiler draws it as all-reduces in the verify.
    comm_ms: float = 0.0

    @property
    def gpu_ms(self) -> float:
        return self.target_ms + self.draft_ms + self.draft_extend_ms


@dataclass(frozen=True)
class PerfModel:
    params: PerfParams
    overlap: bool
    tp_size: int
    # Speculative shape; steps 0 means plain decoding.
    steps: int
    draft_tokens: int
    graph_max_bs: int
    draft_extend_without_graph: bool
    scale: float

    def decode_ms(self, batch: int) -> float:
        split = self.decode_split(batch)
        return self._combine(split.gpu_ms, split.cpu_ms)

    def decode_split(self, batch: int) -> DecodeSplit:
        """The unscaled pieces of one decode iteration; the profiler draws its trace from them."""
        p = self.params
        tp = self.tp_size
        spec = self.steps > 0
        d = self.draft_tokens if spec else 1
        no_graph = batch > self.graph_max_bs
        comm = p.tp_comm_ms * (tp - 1)
        target = p.gpu_base_ms + p.gpu_per_token_ms * batch * d / tp + comm
        target += p.no_graph_target_ms if no_graph else 0.0
        draft = extend = 0.0
        if spec:
            # The draft term covers `steps` draft forwards plus the draft-extend pass: one share each.
            per_pass = (p.draft_base_ms + p.draft_per_req_ms * batch / tp) * self.steps / (self.steps + 1)
            per_pass += p.no_graph_draft_step_ms * self.steps / (self.steps + 1) if no_graph else 0.0
            draft, extend = per_pass * self.steps, per_pass
            if self.draft_extend_without_graph:
                extend += p.draft_extend_no_graph_ms
        cpu = p.cpu_base_ms + p.cpu_per_req_ms * batch
        return DecodeSplit(target_ms=target, draft_ms=draft, draft_extend_ms=extend, cpu_ms=cpu, comm_ms=comm)

    def prefill_ms(self, new_requests: int, uncached_tokens: int) -> float:
        p = self.params
        factor = 1.0 + (p.prefill_draft_factor if self.steps > 0 else 0.0)
        gpu = p.prefill_base_ms + p.prefill_per_token_ms * uncached_tokens / self.tp_size * factor
        cpu = p.cpu_base_ms + p.cpu_per_req_ms * new_requests
        return self._combine(gpu, cpu)

    def _combine(self, gpu: float, cpu: float) -> float:
        total = max(gpu, cpu) + self.params.overlap_sync_ms if self.overlap else gpu + cpu
        return total * self.scale
