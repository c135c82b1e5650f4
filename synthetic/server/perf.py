"""The deterministic cost model: how long one scheduler iteration takes, in milliseconds.

Decode iteration with `b` running requests, `d` tokens verified per request (`d` = draft tokens
with speculative decoding, 1 without), `s` draft steps and tensor parallelism `tp`:

    gpu = gpu_base + gpu_per_token * b * d / tp + tp_comm * (tp - 1)
        + [spec]  s * (draft_base + draft_per_req * b / tp)
        + [spec, FlashMLA, <= 0.5.15]  draft_extend_no_graph
        + [no CUDA graph, i.e. graphs disabled or b > graph max bs]
              no_graph_target + [spec] s * no_graph_draft_step
    cpu = cpu_base + cpu_per_req * b

    non-overlap (spec v1, or --disable-overlap-schedule):  t = gpu + cpu
    overlap (spec v2, and plain decoding by default):       t = max(gpu, cpu) + overlap_sync

Prefill of `n` new requests with `u` uncached prompt tokens uses the same overlap rule with

    gpu = prefill_base + prefill_per_token * u / tp * (1 + [spec] prefill_draft_factor)
    cpu = cpu_base + cpu_per_req * n

Every result is multiplied by SPECBENCH_SIM_TIME_SCALE; instant mode makes every cost 0.
Defaults (`synthetic.server.config.PerfParams`, ms): gpu_base 2.0, gpu_per_token 0.010, draft_base 0.35,
draft_per_req 0.004, cpu_base 0.6, cpu_per_req 0.015, overlap_sync 0.1, no_graph_target 1.2,
no_graph_draft_step 0.25, draft_extend_no_graph 0.3, prefill_base 3.0, prefill_per_token 0.008,
prefill_draft_factor 0.1, tp_comm 0.15. For steps 3 / draft 4 at b = 1 that is 3.2 ms per overlap
step (3.7 ms non-overlap); at b = 32, 4.8 ms vs 5.8 ms; plain decoding at b = 32 takes 2.4 ms.
With acceptance 0.7 (2.53 tokens per step) speculative decoding wins clearly at small batches and
loses to plain decoding beyond roughly b = 80, which is the shape a real MLA model shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from synthetic.server.config import PerfParams


@dataclass(frozen=True)
class DecodeSplit:
    target_ms: float
    draft_ms: float
    draft_extend_ms: float
    cpu_ms: float
    # The part of target_ms that is tensor-parallel communication (tp_comm * (tp - 1)); the profiler stand-in
    # draws it as all-reduce kernels inside the verify.
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
        """The unscaled pieces of one decode iteration; the profiler stand-in draws its trace from them."""
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
