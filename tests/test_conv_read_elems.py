"""A convolution reads the input pixels its windows touch, not its whole input (ops/conv.py _touched): a stride-2
1x1 conv (ResNet's downsample) reads a quarter of its input, the figure ZigZag charges."""
import itertools

from hypothesis import given, settings, strategies as st

from accelsim.ops.conv import _touched
from accelsim.ops.registry import get_op
from accelsim.ops.window import out_size


def _brute(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return len({i * stride - padding + j * dilation for i in range(out) for j in range(kernel)} & set(range(size)))


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 40), kernel=st.integers(1, 7), stride=st.integers(1, 6), padding=st.integers(0, 4),
       dilation=st.integers(1, 4))
def test_touched_positions_equal_the_set_of_window_taps(size, kernel, stride, padding, dilation):
    out = out_size(size, kernel, stride, padding, dilation)
    if out > 0:
        assert _touched(size, out, kernel, stride, padding, dilation) == _brute(size, out, kernel, stride, padding, dilation)


def test_a_strided_1x1_conv_reads_a_quarter_of_its_input_and_a_3x3_all_of_it():
    op = get_op("conv2d")
    x = (2, 64, 56, 56)
    geo = {"padding": (0, 0), "dilation": (1, 1), "groups": 1}
    w1 = (128, 64, 1, 1)
    out1 = op.infer(x, w1, stride=(2, 2), **geo)
    assert op.read_elems(out1, x, w1, stride=(2, 2), **geo) == 2 * 64 * 28 * 28 + 128 * 64
    w3 = (64, 64, 3, 3)
    geo3 = {**geo, "padding": (1, 1)}
    out3 = op.infer(x, w3, stride=(1, 1), **geo3)
    assert op.read_elems(out3, x, w3, stride=(1, 1), **geo3) == 2 * 64 * 56 * 56 + 64 * 64 * 9


def test_the_weight_gradient_reads_the_same_pixels_as_the_forward_conv():
    conv, grad_w = get_op("conv2d"), get_op("conv2d_grad_weight")
    for stride, kernel in itertools.product((1, 2, 3), (1, 2, 3)):
        x, w = (1, 4, 11, 9), (6, 4, kernel, kernel)
        geo = {"stride": (stride, stride), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
        out = conv.infer(x, w, **geo)
        pixels = conv.read_elems(out, x, w, **geo) - 6 * 4 * kernel * kernel
        assert grad_w.read_elems(w, x, out, weight_shape=w, **geo) == pixels + 1 * 6 * out[2] * out[3]
        assert (pixels == 4 * 11 * 9) == (stride <= kernel and (11 - kernel) % stride == 0 and (9 - kernel) % stride == 0)
