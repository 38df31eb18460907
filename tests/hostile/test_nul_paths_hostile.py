"""A NUL byte in an output file name: a shell cannot pass one, but main() and the library called from Python can,
and the OS call then raises ValueError. Each writer refuses it in one paragraph instead (no traceback)."""
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import AccelsimError
from accelsim.schedule import mapping_file
from accelsim.schedule.mapping_file import write_mapping_file
from accelsim.viz.perfetto import write_perfetto


@pytest.mark.parametrize("flag, name", [("--json", "a\x00b.json"), ("--report", "r\x00.csv"), ("--out", "d\x00ir"),
                                        ("--mapping-out", "m\x00.yaml")])
def test_main_refuses_a_nul_byte_in_an_output_name_before_any_work(flag, name, capsys):
    assert main(["run", "--hw", "groq_like", flag, name, "--no-sim"]) != 0
    err = capsys.readouterr().err
    assert "NUL byte" in err and flag in err and "Traceback" not in err


def test_compile_refuses_a_nul_byte_in_its_output_name(capsys):
    assert main(["compile", "--hw", "groq_like", "-o", "x\x00.json"]) != 0
    assert "NUL byte" in capsys.readouterr().err


def test_the_perfetto_writer_refuses_a_nul_byte(tmp_path):
    fwd = A.models.build("mlp", batch=2, sizes=(8, 4))
    hw = A.load_hw("groq_like")
    result = A.simulate(A.compile(fwd, hw, effort="fast"), hw, graph=fwd)
    with pytest.raises(AccelsimError, match="Perfetto"):
        write_perfetto(result, str(tmp_path / "t\x00.json"))


def test_write_mapping_file_refuses_a_nul_byte(tmp_path, monkeypatch):
    """The entries' contents do not matter to where they are written: the writer's data step is stubbed."""
    monkeypatch.setattr(mapping_file, "mapping_data", lambda mappings: {"mappings": []})
    with pytest.raises(AccelsimError, match="cannot write the mapping file"):
        write_mapping_file(("entry",), str(tmp_path / "m\x00.yaml"))
