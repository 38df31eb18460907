"""An output path that is a named pipe, a device or a directory is refused before anything is written: opening a
FIFO for writing waits for a reader, so writing a schedule, a mapping file or a JSON summary there would hang
the command (safe_file.special_target)."""
import os

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import ScheduleError
from accelsim.schedule.io import save_schedule
from accelsim.schedule.mapping_file import MappingFileError, write_mapping_file
from accelsim.schedule.mappings import NodeMapping

MLP = ["--model", "mlp", "--batch", "2", "--set", "sizes=16,8,4", "--optimizer", "sgd", "--lr", "0.01"]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command, flag", [("compile", "-o"), ("compile", "--mapping-out"), ("run", "--json"),
                                           ("run", "--report")])
def test_a_fifo_output_is_refused_before_compiling(fifo, command, flag, capsys):
    extra = ["--no-sim"] if command == "run" else []
    code = main([command, *MLP, "--hw", "groq_like", *extra, flag, str(fifo)])
    err = capsys.readouterr().err
    assert code != 0 and "named pipe (FIFO)" in err and flag in err and "Traceback" not in err


@pytest.mark.timeout(120)
def test_compile_refuses_a_directory_output(tmp_path, capsys):
    code = main(["compile", *MLP, "--hw", "groq_like", "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and "is a directory" in err and "Traceback" not in err


@pytest.mark.timeout(120)
def test_the_library_writers_refuse_a_fifo(fifo):
    schedule = A.compile(A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)), optimizer="sgd",
                                          lr=0.01), "groq_like")
    with pytest.raises(ScheduleError, match="named pipe"):
        save_schedule(schedule, fifo)
    with pytest.raises(MappingFileError, match="named pipe"):
        write_mapping_file((NodeMapping.model_construct(),), fifo)
