"""`accelsim run --granularity stage --zero 3` (cli/stage_step.py): the summary says the step shards its
parameters and how much each stage gathers at once, figures the --json payload carries too."""
import json

from accelsim.cli import main

HW = "a100_x8"


def test_a_zero_3_stage_step_prints_its_shards_and_gathered_peak(tmp_path, capsys):
    out = tmp_path / "step.json"
    argv = ["run", "--hw", HW, "--model", "transformer_block", "--training", "--pipeline-stages", "2",
            "--data-parallel", "2", "--microbatches", "2", "--zero", "3", "--granularity", "stage",
            "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert "ZeRO stage 3" in text
    gathered = data["peak_gathered_bytes"]
    assert len(gathered) == 2 and all(g > 0 for g in gathered)
    lines = [line for line in text.splitlines() if line.lstrip().startswith("stage ")]
    assert len(lines) == 2 and all("a 1/2 shard held per replica, up to" in line for line in lines)
