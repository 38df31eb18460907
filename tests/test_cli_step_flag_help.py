"""The step flags' help speaks the CLI's words: a field's "(None: ...)" reads as the flag's default, once."""
import pytest

from accelsim.cli.step_flags import FLAGS, flag_help


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_no_flag_help_says_none_or_repeats_a_parenthesis(name):
    text = flag_help(name)
    assert "(None" not in text
    assert text.count("(default") + text.count("; default") <= 1, text


def test_a_closing_python_default_becomes_the_flags_default():
    assert flag_help("stage_layers") == ("layers per pipeline stage, first stage first "
                                        "(default: balanced by cost; e.g. 5,5,6,6: one count per stage)")


def test_max_in_flight_states_its_default_once():
    assert flag_help("max_in_flight").count("as many as fit the fastest memory") == 1


def test_remat_lists_its_policies_once():
    assert flag_help("remat").count("every:K") == 1
