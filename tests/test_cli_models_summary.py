"""`accelsim models`: each model's line is a whole sentence, however its builder's docstring wraps."""
from accelsim.cli import main
from accelsim.cli.graph_cmds import model_summary


def test_summary_is_the_first_sentence_joined_across_wrapped_lines():
    doc = """One block; `t`: Megatron-LM's
    split over t ranks. More detail here.

    A second paragraph."""
    assert model_summary(doc) == "One block; `t`: Megatron-LM's split over t ranks."


def test_summary_keeps_decimal_points_inside_the_sentence():
    assert model_summary("y = 11.652, dy/dx1 = 5.5 at (2, 5).\n    Then more.") == "y = 11.652, dy/dx1 = 5.5 at (2, 5)."


def test_models_prints_transformer_block_line_whole(capsys):
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    descriptions = [line for line in lines if line and not line.startswith(" ")]
    assert any("Megatron-LM's split over that many ranks." in line for line in descriptions)
    assert all(line.rstrip().endswith(".") for line in descriptions)
