"""Start-up stays cheap: `import accelsim`, `accelsim --version` and `accelsim --help` load none of the heavy
libraries (they are imported where a stage uses them), while the public API and the CLI's help are the same as
when everything was imported eagerly. Checked by what a fresh interpreter has in sys.modules, never by a clock."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim.cli import COMMANDS, make_parser

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numba", "simpy", "matplotlib", "torch", "onnx", "pandas", "ortools")
PROBE = "import sys; print(sorted(m for m in {heavy!r} if m in sys.modules))"


def _python(*args: str) -> subprocess.CompletedProcess:
    """A fresh interpreter on this source tree."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _heavy_after(code: str) -> list[str]:
    proc = _python("-c", f"{code}\n{PROBE.format(heavy=HEAVY)}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_the_probe_sees_a_heavy_import():
    """The check below could fail: importing a stage that plots does load matplotlib."""
    assert "matplotlib" in _heavy_after("import accelsim.viz")


def test_import_accelsim_loads_no_heavy_library():
    assert _heavy_after("import accelsim") == []


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_cli_version_and_help_load_no_heavy_library(flag):
    code = (f"import sys, runpy; sys.argv = ['accelsim', {flag!r}]\n"
            "try:\n    runpy.run_module('accelsim', run_name='__main__')\nexcept SystemExit as e:\n"
            "    assert e.code == 0, e.code")
    assert _heavy_after(code) == []


def test_the_cli_version_runs_as_a_module():
    proc = _python("-m", "accelsim", "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"accelsim {A.__version__}", proc


def test_every_public_name_resolves_in_a_fresh_interpreter():
    """Each name of __all__ is the object its module defines, whichever is touched first."""
    code = ("import importlib, accelsim as A\n"
            "for name in A.__all__:\n"
            "    value = getattr(A, name)\n"
            "    home = A._LAZY.get(name) or ('accelsim.errors' if name.endswith('Error') else None)\n"
            "    expected = getattr(importlib.import_module(home), name) if home else "
            "importlib.import_module('accelsim.' + name)\n"
            "    assert value is expected, (name, value, expected)\n"
            "print('ok')")
    proc = _python("-c", code)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_every_public_name_resolves_here():
    for name in A.__all__:
        assert getattr(A, name) is not None, name
    assert set(A.__all__) <= set(dir(A))


def test_evaluate_is_the_function_even_when_its_module_was_imported_first():
    code = ("import accelsim.evaluate, accelsim.execute.check, accelsim as A\n"
            "import sys; m = sys.modules['accelsim.evaluate']\n"
            "assert callable(A.evaluate) and A.evaluate is m.evaluate, A.evaluate\n"
            "from accelsim import evaluate\nassert evaluate is m.evaluate\nprint('ok')")
    proc = _python("-c", code)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_evaluate_cannot_be_silently_replaced():
    with pytest.raises(AttributeError, match="read-only"):
        A.evaluate = print


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        A.no_such_thing
    assert not hasattr(A, "__no_such_dunder__")


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def test_the_lazy_listing_is_the_full_one():
    """COMMANDS repeats each subcommand's help for `accelsim --help`: it must match what the modules register."""
    full = make_parser()
    assert list(_subparsers(full).choices) == list(COMMANDS)
    assert make_parser(None, lazy=True).format_help() == full.format_help()
    assert make_parser("no-such-command", lazy=True).format_help() == full.format_help()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_subcommand_parses_and_helps_as_in_the_full_parser(command):
    full, lazy = make_parser(), make_parser(command, lazy=True)
    assert lazy.format_help() == full.format_help()
    assert _subparsers(lazy).choices[command].format_help() == _subparsers(full).choices[command].format_help()
    assert _subparsers(lazy).choices[command].get_default("fn") is not None \
        or _subparsers(lazy).choices[command]._subparsers is not None
