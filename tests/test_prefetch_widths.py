"""A placement's storage width (hw/placement.py `bytes_per_element`) rescales a leaf's bytes, its whole tiles in a
tiled stream and a stored output the same way (compiler/planning/prefetch.Prefetcher), priced without compiling."""
from __future__ import annotations

import math

import yaml

import accelsim as A
from accelsim.compiler.planning.prefetch import Prefetcher
from accelsim.hw.load import bundled_path
from accelsim.hw.precision import tensor_bytes
from accelsim.passes import inference_graph
from accelsim.schedule.levels import chip_list


def prefetcher(placement: dict) -> tuple[A.Graph, Prefetcher]:
    """tpu_v1_like (int8; weights streamed from DDR3 as whole 256x256 tiles) with `placement` merged into its
    parameters' placement, over a small MLP."""
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["chips"][0]["placement"]["parameters"].update(placement)
    hw = A.load_hw(d)
    g = inference_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)))
    return g, Prefetcher(g, hw, chip_list(hw))


def test_a_weight_streamed_as_whole_tiles_is_padded_at_its_class_width():
    for width, elem in ((None, 1), (4, 4)):
        g, p = prefetcher({} if width is None else {"bytes_per_element": width})
        weights = [n for n in g.params if len(n.shape) == 2]
        assert weights
        for w in weights:  # 64 x 128 and 128 x 32: one 256 x 256 tile each
            nbytes = p.leaf_bytes(w, tensor_bytes(g, w, p.hw))
            assert nbytes == elem * math.prod(w.shape)
            assert p.tiled_leaf_bytes(w, nbytes) == elem * 256 * 256


def test_a_leaf_no_tensor_op_reads_keeps_its_own_bytes_at_its_width():
    g, p = prefetcher({"bytes_per_element": 4})
    biases = [n for n in g.params if len(n.shape) == 1]
    assert biases
    for b in biases:
        nbytes = p.leaf_bytes(b, tensor_bytes(g, b, p.hw))
        assert nbytes == p.tiled_leaf_bytes(b, nbytes) == 4 * b.shape[0]
