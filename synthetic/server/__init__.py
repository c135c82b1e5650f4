"""The stand-in SGLang server: SGLang's HTTP protocol over a simulated GPU, for machines without one.

Launched like SGLang; knobs come from `SPECBENCH_SIM_*` (`synthetic.server.config`). Every `/server_info`
carries a `specbench_sim` block, so its numbers are never taken for GPU measurements.
"""
