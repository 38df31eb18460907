"""`accelsim import --help` says what the command does, as every other subcommand's help does."""
import pytest

from accelsim.cli import main


def test_import_help_has_a_description(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    out = capsys.readouterr().out
    paragraphs = out.split("\n\n")
    assert paragraphs[1].startswith("Import a model file"), out  # the paragraph after the usage
