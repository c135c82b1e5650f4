"""Synthetic DeepSeek-V3 + MTP checkpoints for GPU smoke runs of sglang with FlashMLA: `build_checkpoint`
writes one (torch, safetensors), `synthetic.model.reference` checks what it computes; importing needs neither.
"""

from synthetic.model.build import (
    OWNED_FILES,
    OutputDirError,
    build_checkpoint,
    expected_continuation,
    is_synthetic_checkpoint,
    read_manifest,
    read_mirror_maps,
    read_perm,
)
from synthetic.model.layout import (
    MODES,
    Mode,
    SynthConfigError,
    SynthSizes,
    hf_config,
    tensor_layout,
)
from synthetic.model.presets import approx_params, build_preset, preset_config
