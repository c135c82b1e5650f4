"""The stand-in SGLang server: SGLang's HTTP protocol over a simulated GPU, launched like SGLang, with knobs
from `SPECBENCH_SIM_*`. `/server_info` carries `specbench_sim`, so its numbers never pass for measurements.
"""
