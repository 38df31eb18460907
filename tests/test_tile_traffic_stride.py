"""The tile traffic model (cost/tile_traffic.py) on strided convs: where a stride-s conv's im2col pixels repeat
(kernel columns s apart, none when s >= the kernel), a diagonal stream whose last tile is narrower, windows
that run off the input (holes in the stream), and a stationary tile read from its last row up."""
import numpy as np
import pytest

from accelsim.cost.im2col_holes import hole_runs, stream_holes
from accelsim.cost.systolic import gemm_cycles
from accelsim.cost.tile_traffic import BufferConfig, Stream, fold_window_moves, tile_traffic

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


def test_a_stationary_tile_row_across_a_move_boundary_costs_two_turns():
    """One tile of 4 rows x 3 (positions 0-11), blocks of 1 element, 13 blocks round the circle; the window
    holds 4 and moves 4. Rows are installed 3, 2, 1, 0, each left to right. Row 3 (9-11): 2 moves, window
    [8, 12). Row 2 (6-8): 6 is below, round to it (2 moves, [3, 7)), then 8 (1 move, [7, 11)). Row 1 (3-5):
    round to 3 (2, [2, 6)), 5 is in. Row 0 (0-2): round to 0 (2, [10, 14) = 10-12, 0), then 2 (1, [1, 5)).
    10 moves; going to the last row and once round to the first (3 moves) would miss the rows across."""
    stream = Stream(blocks=1, rows=4, width=3, last_width=3, padded_width=3, diagonal=False)
    assert fold_window_moves(stream, [(0, 0, 4)], 1, buffer_elems=8, active_elems=4) == 10


# A 3x3 stride-2 conv of 8 channels on a 32 x 32 (padded) input with SCALE-Sim's 16 x 16 outputs: the last
# window column and row reach x, y = 32, one past the input.
OFF_INPUT = (8, 3, 16, 2, 32, 32)


def test_the_holes_are_the_im2col_entries_whose_pixel_lies_off_the_input():
    """Counted by hand: the 15 windows of the last column above the last row miss kernel column 2 (3 rows x 8
    channels each, 360), the 15 of the last row miss kernel row 2 (360), the corner misses both (40): 760."""
    runs = hole_runs(M, K, OFF_INPUT)
    assert sum(end - first for _, first, end in runs) == 760
    oy, ox = np.divmod(np.arange(M), 16)
    ky, kx = np.arange(K) // 24, np.arange(K) // 8 % 3
    off = (oy[:, None] * 2 + ky[None, :] >= 32) | (ox[:, None] * 2 + kx[None, :] >= 32)
    marked = np.zeros((M, K), dtype=bool)
    for pixel, first, end in runs:
        marked[pixel, first:end] = True
    assert np.array_equal(marked, off)


@pytest.mark.parametrize("dataflow, side, tile", [("os", ROWS, (32, K, 8, 8)), ("ws", ROWS, (9, M, 8, 8)),
                                                  ("is", COLS, (32, K, 8, 8))])
def test_the_stream_of_a_conv_whose_windows_run_off_the_input_skips_its_holes(dataflow, side, tile):
    holes = stream_holes(dataflow, M, K, side, tile, OFF_INPUT)
    stream = Stream(*tile, padded_width=8, diagonal=dataflow != "is", holes=holes)
    assert holes.total == 760 and stream.elems == M * K - 760


def test_a_conv_whose_windows_stay_on_the_input_fetches_the_same_given_the_input():
    assert _input_fetch((8, 3, 16, 1, 18, 18)) == _input_fetch((8, 3, 16, 1))


@pytest.mark.parametrize("im2col, expected", [((8, 3, 16, 2, 32, 0), "im2col_input_h=0"),
                                              ((8, 3, 15, 2, 32, 32), "output width"),
                                              ((8, 3, 16, 2, 2, 32), "kernel within the 2 x 32 input")])
def test_input_extents_that_do_not_fit_the_gemm_are_refused_naming_them(im2col, expected):
    with pytest.raises(ValueError, match=expected):
        _input_fetch(im2col)
