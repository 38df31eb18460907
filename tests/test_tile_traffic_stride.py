"""The tile traffic model (cost/tile_traffic.py) on strided convs: where a stride-s conv's im2col pixels repeat
(kernel columns s apart, none when s >= the kernel), and a diagonal stream whose last tile is narrower."""
import pytest

from accelsim.cost.systolic import gemm_cycles
from accelsim.cost.tile_traffic import BufferConfig, Stream, tile_traffic

# A 3x3 conv of 8 channels, 16 x 16 outputs, 16 filters, as a GEMM (M = 256 pixels, K = 72, N = 16) on an 8x8
# input-stationary array whose 1 kB input buffer holds a fraction of the 18,432-element im2col stream.
M, K, N, ROWS, COLS = 256, 72, 16, 8, 8
BUFFERS = BufferConfig(input_bytes=1024, weight_bytes=1024, output_bytes=1024, channel_bytes_per_cycle=2)


def _input_fetch(im2col: tuple | None, dataflow: str = "is") -> int:
    compute = gemm_cycles(M, K, N, ROWS, COLS, dataflow).compute_cycles
    return tile_traffic(1, M, K, N, ROWS, COLS, dataflow, compute, 1, BUFFERS, im2col=im2col).input_fetch_elems


def test_a_stride_as_wide_as_the_kernel_repeats_no_pixel_so_the_conv_fetches_as_a_plain_gemm():
    assert _input_fetch((8, 3, 16, 3)) == _input_fetch(None)


def test_stride_1_finds_copies_and_stride_2_fewer_than_stride_1_but_some():
    plain, stride_1, stride_2 = _input_fetch(None), _input_fetch((8, 3, 16, 1)), _input_fetch((8, 3, 16, 2))
    assert stride_1 < stride_2 < plain


def test_the_stride_defaults_to_1_when_the_geometry_leaves_it_out():
    assert _input_fetch((8, 3, 16)) == _input_fetch((8, 3, 16, 1))


@pytest.mark.parametrize("dataflow", ["os", "ws"])
def test_a_streamed_im2col_operand_ignores_the_stride(dataflow):
    """os and ws stream the im2col operand along diagonals; the copies rule is for stationary tiles (is)."""
    assert _input_fetch((8, 3, 16, 2), dataflow) == _input_fetch(None, dataflow)


def test_a_narrower_last_tile_ends_its_diagonal_stream_at_its_last_element():
    """Two tiles of 2 rows, 3 wide then 1 wide (8 elements). Along anti-diagonals: (0,0) | (1,0) (0,1) |
    (2,0) (1,1) (0,2) | (3,0) (1,2): the second tile's rows 2-3 are read from position 3 to position 7."""
    stream = Stream(blocks=2, rows=2, width=3, last_width=1, padded_width=3, diagonal=True)
    assert stream.elems == 8
    assert stream.demand(1, 0, 2) == (3, 7)
    assert stream.demand(0, 0, 2) == (0, 7)  # the first tile's last element, (1, 2), is the stream's last


@pytest.mark.parametrize("im2col, expected", [((8, 3, 16, 0), "im2col_stride=0"), ((8, 3, 16, 1, 1), "im2col"),
                                              ((8, 3, 16, 2.0), "im2col_stride=2.0")])
def test_a_bad_stride_in_the_im2col_geometry_is_refused_naming_it(im2col, expected):
    with pytest.raises(ValueError, match=expected):
        _input_fetch(im2col)
