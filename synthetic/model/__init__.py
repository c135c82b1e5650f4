"""Synthetic DeepSeek-V3 + MTP checkpoints for GPU smoke runs of sglang with FlashMLA.

`build_checkpoint` writes one; `synthetic.model.reference` (imports torch eagerly) checks what it computes.
Importing this package needs neither torch nor safetensors; building does.
"""

from synthetic.model.build import (
    MANIFEST_FILE,
    MIRROR_FILE,
    OWNED_FILES,
    PERM_FILE,
    WEIGHTS_FILE,
    OutputDirError,
    build_checkpoint,
    check_output_dir,
    expected_continuation,
    is_synthetic_checkpoint,
    make_perm,
    make_tensors,
    mirror_maps,
    read_manifest,
    read_mirror_maps,
    read_perm,
)
from synthetic.model.layout import (
    MODES,
    Mode,
    SynthConfigError,
    SynthSizes,
    TensorSpec,
    hf_config,
    tensor_layout,
)
from synthetic.model.presets import PRESETS, approx_params, build_preset, preset_config

__all__ = [
    "MANIFEST_FILE",
    "MIRROR_FILE",
    "MODES",
    "OWNED_FILES",
    "PERM_FILE",
    "PRESETS",
    "WEIGHTS_FILE",
    "Mode",
    "OutputDirError",
    "SynthConfigError",
    "SynthSizes",
    "TensorSpec",
    "approx_params",
    "build_checkpoint",
    "build_preset",
    "check_output_dir",
    "expected_continuation",
    "hf_config",
    "is_synthetic_checkpoint",
    "make_perm",
    "make_tensors",
    "mirror_maps",
    "preset_config",
    "read_manifest",
    "read_mirror_maps",
    "read_perm",
    "tensor_layout",
]
