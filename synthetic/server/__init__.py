"""The stand-in SGLang server: SGLang's HTTP protocol over a simulated GPU, for machines without one.

Launch it exactly like SGLang (`python -m synthetic.server --model-path ... --attention-backend flashmla
--speculative-algorithm EAGLE ...`); stand-in knobs come from `SPECBENCH_SIM_*` environment
variables (see `synthetic.server.config`). Every `/server_info` carries a `specbench_sim` block so that
numbers produced here can never be mistaken for real GPU measurements.
"""
