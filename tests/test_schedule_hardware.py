"""A schedule finds its own hardware (schedule/hardware.py): a bundled config by name (the schedule carries
nothing more, so the shipped schedules keep their bytes), or the whole description when the hardware is a
user's own file, so simulate and check need no --hw, even once the file is gone; an edited description is
refused by the hash."""
import json
import subprocess
import sys

import pytest
import yaml

import accelsim as A
from accelsim.hw.load import bundled_path


def _own_chip(tmp_path, name="my_chip"):
    data = yaml.safe_load(bundled_path("groq_like").read_text())
    data["name"] = name
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _mlp():
    return A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))


def test_a_bundled_config_is_named_not_carried(tmp_path):
    schedule = A.compile(_mlp(), "groq_like")
    assert schedule.hw_spec is None
    A.save_schedule(schedule, tmp_path / "s.json")
    assert "hw_spec" not in json.loads((tmp_path / "s.json").read_text())
    with_overrides = A.compile(_mlp(), A.load_hw("groq_like", overrides={"clock_hz": "1 GHz"}))
    assert with_overrides.hw_spec is None and with_overrides.hw_overrides == {"clock_hz": "1 GHz"}


def test_a_schedule_of_an_own_file_replays_without_it(tmp_path):
    hw_path = _own_chip(tmp_path)
    schedule = A.compile(_mlp(), hw_path)
    assert schedule.hw_spec is not None
    saved = tmp_path / "s.json"
    A.save_schedule(schedule, saved)
    hw_path.unlink()
    loaded = A.load_schedule(saved)
    assert A.simulate(loaded).makespan_cycles == schedule.makespan_cycles
    assert A.run_summary(loaded).hw == "my_chip"
    cli = subprocess.run([sys.executable, "-m", "accelsim", "simulate", str(saved), "--out", str(tmp_path / "plots")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert "my_chip" in cli.stdout


def test_a_bundled_name_with_other_contents_is_carried(tmp_path):
    # a user's file that reuses a bundled name but changes a value is not that bundled config
    data = yaml.safe_load(bundled_path("groq_like").read_text())
    data["clock_hz"] = "123 MHz"
    path = tmp_path / "groq_like.yaml"
    path.write_text(yaml.safe_dump(data))
    schedule = A.compile(_mlp(), path)
    assert schedule.hw_spec is not None
    assert A.simulate(schedule).makespan_cycles == schedule.makespan_cycles


def test_an_edited_carried_description_is_refused(tmp_path):
    schedule = A.compile(_mlp(), _own_chip(tmp_path))
    saved = tmp_path / "s.json"
    A.save_schedule(schedule, saved)
    doc = json.loads(saved.read_text())
    doc["hw_spec"]["clock_hz"] = doc["hw_spec"]["clock_hz"] * 2
    saved.write_text(json.dumps(doc))
    with pytest.raises(A.AccelsimError, match="hash"):
        A.simulate(A.load_schedule(saved))


@pytest.mark.parametrize("bad", [{"name": "x"}, {"chips": "many"}, 7])
def test_a_broken_carried_description_is_one_clear_error(tmp_path, bad):
    schedule = A.compile(_mlp(), _own_chip(tmp_path))
    saved = tmp_path / "s.json"
    A.save_schedule(schedule, saved)
    doc = json.loads(saved.read_text())
    doc["hw_spec"] = bad
    saved.write_text(json.dumps(doc))
    with pytest.raises(A.AccelsimError) as e:
        A.simulate(A.load_schedule(saved))
    assert "Traceback" not in str(e.value)


def test_an_old_schedule_of_an_own_file_says_to_pass_the_hardware(tmp_path):
    schedule = A.compile(_mlp(), _own_chip(tmp_path))
    old = schedule.model_copy(update={"hw_spec": None})
    with pytest.raises(A.AccelsimError, match="not a bundled config.*--hw FILE"):
        A.simulate(old)
