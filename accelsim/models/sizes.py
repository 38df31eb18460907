"""Small option sets of every zoo model, for checks that execute real numbers.

SMALL keeps each model's structure (resnet50's full depth, gpt2's embeddings, blocks and tied head)
at sizes the numba backend runs in seconds; TINY is for numba's CUDA simulator, where every element
costs about a millisecond (it runs each CUDA thread as a Python thread).
"""
from __future__ import annotations

from typing import Any

SMALL: dict[str, dict[str, Any]] = {
    "seed_autodiff": {}, "regression": {}, "mlp": {"batch": 4, "sizes": (16, 8, 4)},
    "superres": {"size": 12}, "resnet_block": {"batch": 2, "channels": 4, "size": 6},
    "transformer_block": {"batch": 1, "seq": 8, "d_model": 16, "heads": 2},
    # gpt2 as a 2-layer small-width transformer
    "gpt2": {"batch": 1, "seq": 8, "layers": 2, "d_model": 16, "heads": 2, "vocab": 32},
    # 64x64 images leave 2x2 maps in the last stage, so batch norm there sees 8 values per channel
    "resnet50": {"batch": 2, "size": 64, "classes": 10, "width": 4},
}

TINY: dict[str, dict[str, Any]] = {
    "seed_autodiff": {}, "regression": {}, "mlp": {"batch": 2, "sizes": (8, 6, 3)},
    "superres": {"size": 4, "width": 4}, "resnet_block": {"batch": 2, "channels": 2, "size": 4},
    "transformer_block": {"batch": 1, "seq": 4, "d_model": 8, "heads": 2},
    "gpt2": {"batch": 1, "seq": 4, "layers": 2, "d_model": 8, "heads": 2, "vocab": 16},
    # 64x64 images, as in SMALL: at 32x32 the last stage's batch norm sees 2 values per channel and
    # its gradients are nearly cancelling sums, so float32 rounding anywhere swings them by 10-60%
    "resnet50": {"batch": 2, "size": 64, "classes": 4, "width": 2},
}
