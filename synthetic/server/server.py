"""The stand-in's state: the resolved launch, the scheduler, and the `/server_info` view of both."""

from __future__ import annotations

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
from synthetic.server.protocol import MetaOptions, PromptSpec
from synthetic.server.radix import RadixCache
from synthetic.server.request import Req, Sink
from synthetic.server.stalls import LoopStalls
from synthetic.server.text import load_encoder
from synthetic.server.tokens import TokenTape, natural_length, prompt_key
from synthetic.server.versions import VersionTraits


class SimServer:
    def __init__(self, resolved: Resolved, cfg: SimConfig, traits: VersionTraits, argv: list[str]) -> None:
        args = resolved.args
        self.resolved = resolved
        self.args = args
        self.cfg = cfg
        self.traits = traits
        self.argv = argv
        # Text prompts: the tokenizer at --tokenizer-path (default: the model path) when there is one.
        self.encode, self.tokenizer_file = load_encoder(
            args.tokenizer_path,
            explicit=args.tokenizer_path != args.model_path and not args.skip_tokenizer_init,
            vocab_size=cfg.vocab_size,
        )
        spec = args.speculative
        steps = args.speculative_num_steps or 0
        flashmla = "flashmla" in (args.attention_backend, args.prefill_attention_backend)
        # What this launch computes wrongly (synthetic.server.wrong): the faults asked for, and whether it dies of
        # 0.5.12's FlashMLA draft-extend bug at its warm-up.
        self.wrong = wrong.for_launch(
            cfg.faults,
            version=cfg.version,
            spec_mode=("v2" if resolved.mode.overlap else "v1") if spec else None,
            steps=steps,
            flashmla=flashmla,
            draft_extend_v2_routed=traits.flashmla_draft_extend_v2_routed,
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
            draft_tokens=args.speculative_num_draft_tokens or 1,
            graph_max_bs=resolved.graph_max_bs,
            draft_extend_without_graph=spec and flashmla and not traits.flashmla_draft_extend_graph,
            scale=0.0 if cfg.instant else cfg.time_scale,
        )
        self.radix = RadixCache(
            page_size=args.page_size,
            capacity_tokens=min(resolved.max_total_num_tokens, cfg.radix_max_tokens),
            enabled=not args.disable_radix_cache,
        )
        self.metrics = (
            Metrics(
                model_name=args.served_model_name,
                speculative=spec,
                spec_gauges=traits.spec_gauges,
                verify_calls=traits.spec_verify_calls_metric,
            )
            if args.enable_metrics
            else None
        )
        self.engine = Engine(
            resolved=resolved,
            perf=self.perf,
            acceptance=self.acceptance,
            radix=self.radix,
            metrics=self.metrics,
            instant=cfg.instant,
            record_step_time=cfg.record_step_time,
        )
        self.meta_opts = MetaOptions(
            with_text=not args.skip_tokenizer_init,
            speculative=spec,
            draft_tokens=args.speculative_num_draft_tokens or 1,
            spec_aliases=traits.spec_alias_keys,
            running_waiting=traits.running_waiting_in_meta,
            timing=args.enable_metrics,
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
        if internal:
            self._internal_requests += 1
            faults: frozenset[str] = frozenset()
        elif spec.rid is not None and spec.rid.startswith(CHECK_RID_PREFIX):
            faults = frozenset()  # the correctness check's requests: a fault is meant for the measurement's
        else:
            self.user_requests += 1
            faults = cfg.faults.for_request(self.user_requests)
        key = prompt_key(spec.ids, cfg.seed)
        speculative = self.acceptance is not None
        rng: random.Random | None = None
        if speculative:
            # Greedy decoding is a function of the prompt: so are the tokens, and so is which draft a verify step
            # accepts. The same prompt then gets the same acceptance on every server, v1 and v2 alike.
            rng = (
                random.Random(f"{cfg.seed}:internal-{self._internal_requests}")
                if internal
                else prompt_rng(cfg.seed, key)
            )
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
            hist_len=(self.args.speculative_num_draft_tokens or 1) if speculative else 0,
        )

    def server_info(self) -> dict[str, Any]:
        resolved, traits, args = self.resolved, self.traits, self.args
        flat = args.flat(traits)
        info: dict[str, Any] = dict(flat)
        info["status"] = "ready"
        info["max_total_num_tokens"] = resolved.max_total_num_tokens
        info["max_req_input_len"] = min(resolved.context_len, resolved.max_total_num_tokens) - 1
        if traits.kv_events_key:
            info["kv_events"] = None
        if traits.launch_info_keys:
            info["launch_command"] = ["python", "-m", "sglang.launch_server", *self.argv]
            info["startup_time"] = self.started_at
            info["frontend"] = "python"
        info["version"] = traits.version
        state: dict[str, Any] = dict(flat)
        counters = self.engine.counters
        state["last_gen_throughput"] = counters.last_gen_throughput
        graph_gb = 0.0 if resolved.graph_max_bs == 0 else 0.8
        state["memory_usage"] = {
            "weight": round(self.cfg.weights_gb / args.tp_size, 2),
            "kvcache": resolved.kv_cache_gb,
            "token_capacity": resolved.max_total_num_tokens,
            "graph": {"decode": graph_gb, "prefill": 0.0} if traits.graph_memory_per_phase else graph_gb,
        }
        state["effective_max_running_requests_per_dp"] = resolved.effective_max_running_requests
        avg = counters.avg_accept_length() if args.speculative else None
        if avg is not None:
            state["avg_spec_accept_length"] = avg
        if self.engine.step_time is not None:
            state["step_time_dict"] = self.engine.step_time
        if traits.launch_info_keys:
            state["world_size"] = args.tp_size
            state["startup_time"] = self.started_at
        info["internal_states"] = [state]
        info["specbench_sim"] = self.provenance()
        return info

    def expert_routing(self) -> str:
        """How this server's MoE layers would route, as SGLang would run them. SGLang itself reports neither
        switch anywhere (not in /server_info, not in its log); the stand-in says it under `specbench_sim`."""
        moe = is_moe(read_model_config(self.args.model_path))
        if moe is False:
            return "dense model: no experts to route"
        dummy = self.args.load_format == "dummy"
        ignored = [
            n
            for n, on in (
                ("SGLANG_SIMULATE_UNIFORM_EXPERTS", self.cfg.simulate_uniform_experts),
                ("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS", self.cfg.simulate_round_robin_experts),
            )
            if on
        ]
        if self.traits.routing_switches and self.cfg.simulate_uniform_experts:
            return "uniform (SGLANG_SIMULATE_UNIFORM_EXPERTS)"
        if self.traits.routing_switches and self.cfg.simulate_round_robin_experts:
            return "round robin (SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS)"
        base = "as initialised: collapsed onto a few experts (dummy weights)" if dummy else "as trained"
        if ignored:
            base += f"; {', '.join(ignored)} ignored (SGLang {self.traits.version} has no such switch)"
        return base

    def provenance(self) -> dict[str, Any]:
        out = self.cfg.provenance()
        out["spec_worker"] = self.resolved.mode.worker
        out["overlap"] = self.resolved.mode.overlap
        out["graph_max_bs"] = self.resolved.graph_max_bs
        out["tokenizer"] = self.tokenizer_file or "hash (no tokenizer.json at the tokenizer path)"
        out["expert_routing"] = self.expert_routing()
        # One emulated GPU per tensor-parallel rank, as a real TP-N server holds N (run provenance records it).
        out["gpu_count"] = self.args.tp_size
        if self.acceptance is not None:
            out["expected_tokens_per_verify_step"] = self.acceptance.expected_tokens_per_step()
        wrong_here = self.wrong.describe()
        if wrong_here:
            out["wrong"] = wrong_here
        out.update(self.stalls.view())  # since the last flush: the window a client just measured
        return out
