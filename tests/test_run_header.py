"""`accelsim run`'s first line says what was simulated: the step options that change the step (pipeline schedule,
in-flight window, precision, rematerialization, fusion, gradient reduction), which it once left out (a --remat
run printed the same header as a plain one)."""
from accelsim.cli import main


def test_the_header_names_the_schedule_window_and_remat(capsys):
    argv = ["run", "--hw", "groq_like_x4", "--model", "mlp", "--set", "sizes=16,8,4", "--batch", "8",
            "--pipeline-stages", "2", "--microbatches", "4", "--pipeline-schedule", "1f1b", "--remat", "sqrt",
            "--no-sim"]
    assert main(argv) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "pipeline schedule 1f1b" in header and "remat sqrt" in header and " in flight" in header


def test_a_plain_step_keeps_its_short_header(capsys):
    assert main(["run", "--hw", "groq_like", "--model", "mlp", "--set", "sizes=16,8,4", "--batch", "8",
                 "--no-sim"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "schedule" not in header and "remat" not in header and "precision" not in header
