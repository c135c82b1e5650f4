"""The stand-in's state: the resolved launch, the scheduler, and the `/server_info` view of both."""

import os
import random
import time
from typing import Any

from bench.correctness.outputs import CHECK_RID_PREFIX
from bench.model_config import is_moe, read_model_config
from synthetic.server import wrong
from synthetic.server.acceptance import AcceptanceModel, prompt_rng
from synthetic.server.args import Resolved
from synthetic.server.config import SimConfig
from synthetic.server.engine import Engine
from synthetic.server.metrics import Metrics
from synthetic.server.perf import PerfModel
from synthetic.server.protocol import EventEncoder, PromptSpec
from synthetic.server.radix import RadixCache
from synthetic.server.release import Release
from synthetic.server.request import Req, Sink
from synthetic.server.stalls import LoopStalls
from synthetic.server.text import load_encoder
from synthetic.server.tokens import TokenTape, natural_length, prompt_key

ROUTING_SWITCHES = ("SGLANG_SIMULATE_UNIFORM_EXPERTS", "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS")


class SimServer:
    def __init__(self, resolved: Resolved, cfg: SimConfig, rel: Release) -> None:
        args = self.args = resolved.args
        self.resolved, self.cfg, self.release = resolved, cfg, rel
        self.encode, self.tokenizer_file = load_encoder(
            args.tokenizer_path,
            explicit=args.tokenizer_path != args.model_path and not args.skip_tokenizer_init,
            vocab_size=cfg.vocab_size,
        )
        spec = args.speculative
        steps = args.speculative_num_steps or 0
        self.draft_tokens = args.speculative_num_draft_tokens or 1
        flashmla = "flashmla" in (args.attention_backend, args.prefill_attention_backend)
        self.wrong = wrong.for_launch(
            cfg.faults,
            version=cfg.version,
            spec_mode=("v2" if resolved.mode.overlap else "v1") if spec else None,
            steps=steps,
            flashmla=flashmla,
            routed=rel.flashmla_draft_extend_v2_routed,
        )
        self.acceptance = (
            AcceptanceModel(
                steps=steps,
                topk=args.speculative_eagle_topk or 1,
                rate=cfg.acceptance_rate * (wrong.DRAFT_FAULT_FACTOR if self.wrong.draft else 1.0),
                simulate_len=cfg.simulate_acc_len,
                simulate_method=cfg.simulate_acc_method,
                max_accepted=self.wrong.max_accepted,
            )
            if spec
            else None
        )
        self.perf = PerfModel(
            params=cfg.perf,
            overlap=resolved.mode.overlap,
            tp_size=args.tp_size,
            steps=steps,
            draft_tokens=self.draft_tokens,
            graph_max_bs=resolved.graph_max_bs,
            draft_extend_without_graph=spec and flashmla and not rel.flashmla_draft_extend_graph,
            scale=0.0 if cfg.instant else cfg.time_scale,
        )
        radix = RadixCache(
            page_size=args.page_size,
            capacity_tokens=min(resolved.max_total_num_tokens, cfg.radix_max_tokens),
            enabled=not args.disable_radix_cache,
        )
        self.metrics = Metrics(args.served_model_name) if args.enable_metrics else None
        self.engine = Engine(
            resolved=resolved,
            perf=self.perf,
            acceptance=self.acceptance,
            radix=radix,
            metrics=self.metrics,
            instant=cfg.instant,
        )
        # This process's own scheduling stalls since the last flush (run as a task by __main__).
        self.stalls = LoopStalls(busy=lambda: not self.engine.idle)
        self.ready = False
        self.shutting_down = False
        self.started_at = time.time()
        self.user_requests = 0
        self._internal_requests = 0
        # Generated rids only need to be unique; os.urandom per request would cost a syscall.
        self._rid_rng = random.Random(os.urandom(16))

    def new_request(self, spec: PromptSpec, sink: Sink, *, internal: bool = False) -> Req:
        cfg = self.cfg
        self.stalls.poke()
        faults: frozenset[str] = frozenset()
        if internal:
            self._internal_requests += 1
        elif spec.rid is None or not spec.rid.startswith(CHECK_RID_PREFIX):  # faults spare the gate's check
            self.user_requests += 1
            faults = cfg.faults.for_request(self.user_requests)
        key = prompt_key(spec.ids, cfg.seed)
        speculative = self.acceptance is not None
        rng: random.Random | None = None
        if speculative:
            # Greedy tokens and the drafts a verify step accepts are functions of the prompt, on every server.
            internal_seed = f"{cfg.seed}:internal-{self._internal_requests}"
            rng = random.Random(internal_seed) if internal else prompt_rng(cfg.seed, key)
        natural = None if spec.ignore_eos else natural_length(key, cfg.eos_mean_tokens, spec.min_new_tokens)
        tape = TokenTape(
            key,
            with_text=not self.args.skip_tokenizer_init,
            simulated_acc=speculative and cfg.simulate_acc_len is not None,
            eos_id=cfg.eos_token_id,
            eos_at=natural - 1 if natural is not None and natural < spec.max_new_tokens else None,
            diverge_at=wrong.diverge_at(key) if self.wrong.verify and not internal else None,
        )
        return Req(
            rid=spec.rid if spec.rid is not None else f"{self._rid_rng.getrandbits(128):032x}",
            prompt=spec.ids,
            max_new_tokens=spec.max_new_tokens,
            natural_len=natural,
            stream_interval=spec.stream_interval or self.args.stream_interval,
            rng=rng,
            tape=tape,
            sink=sink,
            internal=internal,
            faults=faults,
            hist=[0] * self.draft_tokens if speculative else [],
        )

    def encoder(self, req: Req, index: int | None) -> EventEncoder:
        with_text = not self.args.skip_tokenizer_init
        return EventEncoder(req, with_text=with_text, draft_tokens=self.draft_tokens, index=index)

    def server_info(self) -> dict[str, Any]:
        resolved, args = self.resolved, self.args
        info: dict[str, Any] = args.flat(self.release)
        info["status"] = "ready"
        info["max_total_num_tokens"] = resolved.max_total_num_tokens
        info["max_req_input_len"] = min(resolved.context_len, resolved.max_total_num_tokens) - 1
        info["version"] = self.release.version
        state: dict[str, Any] = {"last_gen_throughput": self.engine.counters.last_gen_throughput}
        avg = self.engine.counters.avg_accept_length() if args.speculative else None
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        info["internal_states"] = [state]
        info["specbench_sim"] = self.provenance()
        return info

    def expert_routing(self) -> str:
        """How this server's MoE layers would route (SGLang reports it nowhere, so `specbench_sim` does)."""
        if is_moe(read_model_config(self.args.model_path)) is False:
            return "dense model: no experts to route"
        switches = self.release.routing_switches
        values = (self.cfg.simulate_uniform_experts, self.cfg.simulate_round_robin_experts)
        on = [name for name, value in zip(ROUTING_SWITCHES, values, strict=True) if value]
        if switches and on:
            return f"{'uniform' if on[0].endswith('UNIFORM_EXPERTS') else 'round robin'} ({on[0]})"
        dummy = self.args.load_format == "dummy"
        base = "as initialised: collapsed onto a few experts (dummy weights)" if dummy else "as trained"
        if on:
            base += f"; {', '.join(on)} ignored (SGLang {self.release.version} has no such switch)"
        return base

    def provenance(self) -> dict[str, Any]:
        out = self.cfg.provenance()
        out["spec_worker"] = self.resolved.mode.worker
        out["overlap"] = self.resolved.mode.overlap
        out["graph_max_bs"] = self.resolved.graph_max_bs
        out["tokenizer"] = self.tokenizer_file or "hash (no tokenizer.json at the tokenizer path)"
        out["expert_routing"] = self.expert_routing()
        # One emulated GPU per TP rank, as a real TP-N server holds N (run provenance records it).
        out["gpu_count"] = self.args.tp_size
        if self.acceptance is not None:
            out["expected_tokens_per_verify_step"] = self.acceptance.expected_tokens_per_step()
        if wrong_here := self.wrong.describe():
            out["wrong"] = wrong_here
        out.update(self.stalls.view())  # since the last flush: the window a client just measured
        return out
