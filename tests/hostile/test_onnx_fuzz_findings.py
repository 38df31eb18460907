"""What experiments/fuzz.py's onnx target found, each kept as a case: a file the importer must refuse in one
paragraph rather than crash on."""
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")  # the `onnx` extra (installed by the README's test command)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import fuzz  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.frontends.onnx_import import load_onnx  # noqa: E402


def _cnn() -> "onnx.ModelProto":
    return onnx.load_from_string(fuzz.onnx_bases()["cnn"])


@pytest.mark.parametrize("data_type", [19, 29, 10_000])
def test_an_initializer_of_an_element_type_onnx_does_not_know_is_refused(tmp_path, data_type):
    model = _cnn()
    model.graph.initializer[1].data_type = data_type  # 19: FLOAT8E5M2; 29 and 10,000: no ONNX type
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(A.AccelsimError, match="initializer 'b'.*element type") as e:
        load_onnx(path)
    assert "\n" not in str(e.value)


def test_a_name_that_is_not_utf8_is_refused(tmp_path):
    raw = fuzz.onnx_bases()["cnn"]
    junk = bytes.fromhex("955f94e944c0")  # the fuzzer's finding: six bytes over an attribute's name at byte 115
    path = tmp_path / "m.onnx"
    path.write_bytes(raw[:115] + junk + raw[115 + len(junk):])
    with pytest.raises(A.AccelsimError, match="not UTF-8") as e:
        load_onnx(path)
    assert "\n" not in str(e.value)
