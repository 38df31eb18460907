"""Hostile model files: memory bombs in ONNX constant folding and in .pt2 archives, files that are not regular
files (/dev/zero, /dev/urandom, FIFOs, sockets, symlink loops) wherever accelsim reads one, and graph files that
record passes accelsim does not know.

Every file is made here, in a temporary folder (onnx.helper, hand-built zip archives), never committed. The
refusals run in child processes (`accelsim.cli.main`, as `python -m accelsim` runs it, or a Python snippet)
under the suite's address-space cap and timeout (tests/hostile/conftest.py), so a bomb that is not refused
ends as a failed test, not as a machine out of memory or a hung run; one module fixture runs them all. Each
test checks one refusal: exit status 1, no traceback, one paragraph naming the file and the rule. No test
measures time.
"""
from __future__ import annotations

import json
import os
import socket
import struct
import zlib
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import accelsim as A
from accelsim.frontends import save_graph

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FOLD = ("max-folded-elements", "max_folded_elements")
BYTES = ("max-model-bytes", "max_file_bytes")


# -- ONNX models -------------------------------------------------------------------------------------------
def _const(name: str, value) -> object:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _model(nodes, rank: int = 1, inputs=(), initializers=(), functions=()) -> object:
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"d{i}" for i in range(rank)])
    graph = helper.make_graph(list(nodes), "hostile", list(inputs), [out], list(initializers))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)] if functions else [])
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions))


def _filled(name: str, shape, out: str) -> list:
    """A ConstantOfShape of ones: a large constant from a few bytes of file."""
    return [_const(name, np.array(shape, np.int64)),
            helper.make_node("ConstantOfShape", [name], [out], value=numpy_helper.from_array(np.ones(1, np.float32)))]


def _expanded(name: str, shape, out: str) -> list:
    """A constant of ones broadcast by Expand, which the importer folds (a float ConstantOfShape above 4,096
    elements stays a lazy leaf instead): the operand of a fold-time compute bomb."""
    return [_const(f"{name}_one", np.ones(1, np.float32)), _const(name, np.array(shape, np.int64)),
            helper.make_node("Expand", [f"{name}_one", name], [out])]


def _sparse(dims: list[int]) -> object:
    """A sparse tensor of `dims` holding one value: 30 bytes of file for any size once densified."""
    return helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.float32), "v"),
                                     numpy_helper.from_array(np.array([5]), "i"), dims)


def _nested_functions(levels: int, recursive: bool = False) -> object:
    """Function f_k calls f_{k-1} twice: 2**levels Relu nodes once inlined, from a file of ~70 bytes a level."""
    functions = []
    for k in range(levels):
        callee = f"f{k}" if recursive else f"f{k - 1}"
        body = ([helper.make_node("Relu", ["x"], ["y"])] if k == 0 else
                [helper.make_node(callee, ["x"], ["t"], domain="local"),
                 helper.make_node(callee, ["t"], ["y"], domain="local")])
        functions.append(helper.make_function("local", f"f{k}", ["x"], ["y"], body, [helper.make_opsetid("", 17)]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    return _model([helper.make_node(f"f{levels - 1}", ["x"], ["y"], domain="local")], inputs=[x],
                  functions=functions)


def _loop_forever() -> object:
    """A Loop of 2**62 trips on constants: folding it would never end."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])])
    return _model([_const("m", np.array(2**62, np.int64)), _const("c", np.array(True)),
                   _const("v", np.ones(1, np.float32)), helper.make_node("Loop", ["m", "c", "v"], ["y"], body=body)])


def _external_data_fifo(d: Path) -> Path:
    """A weight whose external data file, beside the model, is a FIFO nobody writes to."""
    os.mkfifo(d / "weights.bin")
    w = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    return _save(d / "external_fifo.onnx", _model([helper.make_node("MatMul", ["x", "w"], ["y"])], rank=2, inputs=[x],
                                                  initializers=[w]))


def _save(path: Path, model) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


ONNX_BOMBS = {  # name -> (model, words the refusal names besides the file)
    "pad_by_2e9": (lambda: _model([_const("c", np.ones(2, np.float32)), _const("p", np.array([0, 2_000_000_000])),
                                   helper.make_node("Pad", ["c", "p"], ["y"])]), ("Pad", "2,000,000,002", FOLD)),
    "matmul_outer_65536": (lambda: _model([_const("a", np.ones((65536, 1), np.float32)),
                                           _const("b", np.ones((1, 65536), np.float32)),
                                           helper.make_node("MatMul", ["a", "b"], ["y"])], rank=2),
                           ("MatMul", "4,294,967,296", FOLD)),
    "mul_broadcast_65536": (lambda: _model([_const("a", np.ones((65536, 1), np.float32)),
                                            _const("b", np.ones((1, 65536), np.float32)),
                                            helper.make_node("Mul", ["a", "b"], ["y"])], rank=2),
                            ("Mul", "[65536, 65536]", FOLD)),
    "where_broadcast_65536": (lambda: _model([_const("c", np.array([True])),
                                              _const("a", np.ones((65536, 1), np.float32)),
                                              _const("b", np.ones((1, 65536), np.float32)),
                                              helper.make_node("Where", ["c", "a", "b"], ["y"])], rank=2),
                              ("Where", FOLD)),
    "tile_by_1e9": (lambda: _model([_const("a", np.ones(3, np.float32)), _const("r", np.array([10**9])),
                                    helper.make_node("Tile", ["a", "r"], ["y"])]), ("Tile", "3,000,000,000", FOLD)),
    # a lazy leaf (not folded): refused by the tensor-size bound before anything is allocated
    "constant_of_shape_1e12": (lambda: _model(_filled("s", [10**6, 10**6], "y"), rank=2),
                               ("ConstantOfShape", "1,000,000,000,000", ("max_tensor_elements",))),
    "expand_to_1e10": (lambda: _model([_const("a", np.ones(1, np.float32)), _const("s", np.array([10**5, 10**5])),
                                       helper.make_node("Expand", ["a", "s"], ["y"])], rank=2), ("Expand", FOLD)),
    "range_of_1e12": (lambda: _model([_const("a", np.array(0.0, np.float32)), _const("b", np.array(1e12, np.float32)),
                                      _const("d", np.array(1.0, np.float32)),
                                      helper.make_node("Range", ["a", "b", "d"], ["y"])]), ("Range", FOLD)),
    "sparse_constant_2e40": (lambda: _model([helper.make_node("Constant", [], ["y"], sparse_value=_sparse([2**40]))]),
                             ("Constant", "1,099,511,627,776", FOLD)),
    "resize_to_1e10": (lambda: _model([_const("a", np.ones((1, 1, 2, 2), np.float32)),
                                       _const("s", np.array([1, 1, 10**5, 10**5])),
                                       helper.make_node("Resize", ["a", "", "", "s"], ["y"])], rank=4),
                       ("Resize", FOLD)),
    "one_hot_depth_1e9": (lambda: _model([_const("i", np.array([1, 2])), _const("d", np.array(10**9)),
                                          _const("v", np.array([0, 1], np.float32)),
                                          helper.make_node("OneHot", ["i", "d", "v"], ["y"])], rank=2),
                          ("OneHot", FOLD)),
    "conv_im2col_workspace": (lambda: _model(_expanded("s", [1, 1, 1024, 1024], "x") + _expanded("k", [1, 1, 64, 64], "w")
                                             + [helper.make_node("Conv", ["x", "w"], ["y"])], rank=4),
                              ("Conv", "workspace", FOLD)),
    "matmul_2048_cubed": (lambda: _model(_expanded("s", [2048, 2048], "a")
                                         + [helper.make_node("MatMul", ["a", "a"], ["y"])], rank=2),
                          ("MatMul", "8,589,934,592 multiply-adds", FOLD)),
    "einsum_three_way": (lambda: _model([_const("a", np.ones(4096, np.float32)), _const("b", np.ones(4096, np.float32)),
                                         _const("c", np.ones(4096, np.float32)),
                                         helper.make_node("Einsum", ["a", "b", "c"], ["y"], equation="i,j,k->")],
                                        rank=0),
                         ("Einsum", "multiply-adds", FOLD)),
    "nested_functions_2e30": (lambda: _nested_functions(31), ("local::f", "inlined", ("max-model-nodes", "max_nodes"))),
    "recursive_function": (lambda: _nested_functions(3, recursive=True), ("local::f2", "recursive")),
    "loop_of_2e62_trips": (_loop_forever, ("Loop", "control flow")),
    "random_constant": (lambda: _model([helper.make_node("RandomNormal", [], ["y"], shape=[4])]), ("RandomNormal",)),
}


# -- .pt2 archives (zip files built by hand, so their directories can lie) -----------------------------------
@cache
def _zeros_16m() -> bytes:
    """Deflate blocks of 16 MiB of zeros that depend on nothing before them: repeated, they inflate to k x 16 MiB."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflate.compress(bytes(2**24)) + deflate.flush(zlib.Z_FULL_FLUSH)


def _zeros_stream(chunks: int) -> bytes:
    """A raw deflate stream of chunks x 16 MiB of zeros (about 16 KB per chunk), ended by an empty final block."""
    return _zeros_16m() * chunks + zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS).flush()


def _zip(members: list[tuple[str, bytes, int, int, int]], offsets: dict[str, int] | None = None) -> bytes:
    """A zip archive of (name, packed bytes, method, crc, declared unpacked size) whose headers say exactly what
    they are given; `offsets` overrides a member's recorded local-header offset."""
    body, central = bytearray(), bytearray()
    for name, packed, method, crc, size in members:
        offset = (offsets or {}).get(name, len(body))
        raw = name.encode()
        body += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(packed), size, len(raw), 0)
        body += raw + packed
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(packed), size, len(raw),
                               0, 0, 0, 0, 0, offset) + raw
    return bytes(body + central + _end_records(len(members), len(central), len(body)))


def _end_records(count: int, cd_size: int, cd_offset: int) -> bytes:
    """The end of central directory record for `count` entries; above 65,535 in zip64 form (a zip64 end
    record and its locator, then the classic record with its 16-bit counts at 0xFFFF)."""
    if count <= 0xFFFF:
        return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, 0)
    zip64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, cd_offset + cd_size, 1)
    return zip64 + locator + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, cd_size, cd_offset, 0)


def _count_lies(archive: bytes, count: int) -> bytes:
    """`archive` (one classic end record, no comment) with end records that declare `count` entries."""
    cd_size, cd_offset = struct.unpack_from("<2L", archive, len(archive) - 10)
    return archive[:-22] + _end_records(count, cd_size, cd_offset)


def _stored(name: str, data: bytes) -> tuple[str, bytes, int, int, int]:
    return name, data, 0, zlib.crc32(data), len(data)


def _bomb_member(name: str, chunks: int, declared: int | None = None) -> tuple[str, bytes, int, int, int]:
    size = chunks * 2**24
    return name, _zeros_stream(chunks), 8, 0, size if declared is None else declared


PT2_BOMBS = {  # name -> (archive bytes, words)
    "pt2_member_of_3_gib": (lambda: _zip([_stored("m/archive_format", b"pt2"),
                                          _bomb_member("m/models/model.json", 192)]),
                            ("m/models/model.json", "3,221,225,472", BYTES)),
    "pt2_members_total_3_gib": (lambda: _zip([_bomb_member(f"m/data/weights/w{k}", 64) for k in range(3)]),
                                ("m/data/weights/w2", BYTES)),
    "pt2_member_declares_less_than_it_holds": (lambda: _zip([_bomb_member("m/models/model.json", 8, declared=1000)]),
                                               ("m/models/model.json", "declares 1,000 bytes", "lies")),
    "pt2_member_declares_more_than_it_holds": (lambda: _zip([("m/models/model.json", b"{}", 0, zlib.crc32(b"{}"),
                                                               10**6)]),
                                               ("m/models/model.json", "lies")),
    "pt2_member_with_a_wrong_crc": (lambda: _zip([("m/models/model.json", b"{}", 0, 12345, 2)]),
                                    ("m/models/model.json", "CRC")),
    "pt2_member_compressed_with_bzip2": (lambda: _zip([("m/models/model.json", b"BZh9", 12, 0, 4)]),
                                         ("m/models/model.json", "method 12")),
    "pt2_member_offset_past_the_end": (lambda: _zip([_stored("m/models/model.json", b"{}")],
                                                    offsets={"m/models/model.json": 10**6}),
                                       ("m/models/model.json", "past the end")),
    "pt2_not_a_zip": (lambda: b"\x80\x02}q\x00." * 100, ("not a zip archive",)),
    "pt2_directory_declares_40m_members": (lambda: _count_lies(_zip([_stored("m/archive_format", b"pt2")]), 40_000_000),
                                           ("declares 40,000,000 members", "100,000")),
    "pt2_of_100_001_members": (lambda: _zip([_stored(f"m/data/{k}", b"") for k in range(100_001)]),
                               ("declares 100,001 members",)),
    "pt2_empty_zip": (lambda: _zip([]), ("empty",)),
}


# -- files that are not regular files ----------------------------------------------------------------------
def _link(d: Path, name: str, target: str) -> Path:
    path = d / name
    os.symlink(target, path)
    return path


def _fifo(d: Path, name: str) -> Path:
    path = d / name
    os.mkfifo(path)
    return path


def _socket(d: Path, name: str) -> Path:
    path = d / name
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))  # the file stays after the socket is closed
    s.close()
    return path


def _link_loop(d: Path, name: str) -> Path:
    a, b = d / name, d / f"other_{name}"
    os.symlink(b, a)
    os.symlink(a, b)
    return a


def _graph_file(d: Path, name: str, edit=None) -> Path:
    g = A.models.build("mlp", batch=2, sizes=(8, 4))
    path = d / name
    save_graph(g, path)
    if edit is not None:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return path


def _jobs(d: Path) -> dict[str, tuple[list[str], bool, tuple]]:
    """key -> (argv, or a one-element Python snippet; api?; words the refusal names)."""
    jobs: dict[str, tuple[list[str], bool, tuple]] = {}
    out = str(d / "out.json")
    for name, (make, words) in ONNX_BOMBS.items():
        path = _save(d / f"{name}.onnx", make())
        jobs[f"onnx_{name}"] = (["import", str(path), "-o", out], False, (path.name, *words))
    for name, (make, words) in PT2_BOMBS.items():
        path = d / f"{name}.pt2"
        path.write_bytes(make())
        jobs[name] = (["import", str(path), "-o", out], False, (path.name, *words))
    small = _save(d / "small.onnx", _model(_filled("s", [100], "y")))
    jobs["onnx_lowered_fold_limit"] = (["import", str(small), "-o", out, "--max-folded-elements", "10"], False,
                                       ("small.onnx", "100 elements", FOLD))
    jobs["onnx_lowered_node_limit"] = (["import", str(small), "-o", out, "--max-model-nodes", "1"], False,
                                       ("small.onnx", ("max-model-nodes", "max_nodes")))
    jobs["onnx_lowered_byte_limit"] = (["import", str(small), "-o", out, "--max-model-bytes", "16"], False,
                                       ("small.onnx", "above the limit of 16 bytes", BYTES))
    jobs["run_model_onnx_bomb_respects_the_limit_flag"] = (
        ["run", "--model", str(small), "--no-sim", "--max-folded-elements", "10"], False, ("small.onnx", FOLD))
    jobs["onnx_external_data_is_a_fifo"] = (["import", str(_external_data_fifo(d)), "-o", out], False,
                                            ("external_fifo.onnx", "weights.bin", "named pipe"))
    special = {"dev_zero": lambda n: _link(d, n, "/dev/zero"), "dev_urandom": lambda n: _link(d, n, "/dev/urandom"),
               "fifo": lambda n: _fifo(d, n)}
    kinds = {"dev_zero": "character device", "dev_urandom": "character device", "fifo": "named pipe"}
    for kind, make in special.items():
        for suffix in (".onnx", ".pt2", ".json"):
            path = make(f"{kind}{suffix}")
            jobs[f"import_{kind}{suffix.replace('.', '_')}"] = (["import", str(path), "-o", out], False,
                                                                (path.name, kinds[kind], "not a regular file"))
    jobs["run_model_fifo_onnx"] = (["run", "--model", str(_fifo(d, "run_fifo.onnx")), "--no-sim"], False,
                                   ("run_fifo.onnx", "named pipe"))
    jobs["run_model_dev_zero_json"] = (["run", "--model", str(_link(d, "run_zero.json", "/dev/zero")), "--no-sim"],
                                       False, ("run_zero.json", "/dev/zero", "character device"))
    jobs["import_socket_onnx"] = (["import", str(_socket(d, "sock.onnx")), "-o", out], False, ("sock.onnx", "socket"))
    jobs["import_symlink_loop_onnx"] = (["import", str(_link_loop(d, "loop.onnx")), "-o", out], False,
                                        ("loop.onnx", "symbolic links"))
    jobs["hw_validate_fifo"] = (["hw", "validate", str(_fifo(d, "hw_fifo.yaml"))], False,
                                ("hw_fifo.yaml", "named pipe", "hardware description"))
    jobs["run_hw_dev_urandom"] = (["run", "--hw", str(_link(d, "hw_urandom.yaml", "/dev/urandom")), "--model", "mlp",
                                   "--no-sim"], False, ("hw_urandom.yaml", "character device"))
    jobs["sweep_spec_fifo"] = (["sweep", str(_fifo(d, "spec_fifo.yaml")), "--out", str(d / "sweep")], False,
                               ("spec_fifo.yaml", "named pipe", "sweep spec"))
    jobs["sweep_spec_dev_zero"] = (["sweep", str(_link(d, "spec_zero.yaml", "/dev/zero")), "--out", str(d / "sweep")],
                                   False, ("spec_zero.yaml", "character device"))
    jobs["simulate_schedule_fifo"] = (["simulate", str(_fifo(d, "sched_fifo.json"))], False,
                                      ("sched_fifo.json", "named pipe", "schedule"))
    jobs["simulate_schedule_dev_zero"] = (["simulate", str(_link(d, "sched_zero.json", "/dev/zero"))], False,
                                          ("sched_zero.json", "character device"))
    api = ("import accelsim as A, sys\nfrom accelsim.frontends import load_graph\ntry:\n    load_graph({path!r})\n"
           "except A.AccelsimError as e:\n    print(e, file=sys.stderr); sys.exit(1)\n")
    jobs["api_load_graph_fifo"] = ([api.format(path=str(_fifo(d, "api_fifo.json")))], True,
                                   ("api_fifo.json", "named pipe"))
    unknown = _graph_file(d, "unknown_pass.json", lambda data: data.update(passes=[{"name": "no_such_pass",
                                                                                    "only": None}]))
    jobs["graph_file_records_an_unknown_pass"] = (["run", "--model", str(unknown), "--no-sim"], False,
                                                  ("unknown_pass.json", "no_such_pass", "does not know"))
    jobs["api_graph_file_unknown_pass_after_a_known_one"] = (
        [api.format(path=str(_graph_file(d, "second_pass.json", lambda data: data.update(
            passes=[{"name": "fuse_elementwise", "only": None}, {"name": "bogus", "only": None}]))))], True,
        ("second_pass.json", "'bogus'", "step 2 of 2"))
    return jobs


REFUSE_STEPS = 20_000_000
"""A hang guard in Python steps (tests/work_meter.py) for each refusal, not a speed check: the refusals run
before any model is built, in a small fraction of it; a loop that never ends is stopped here."""


@pytest.fixture(scope="module")
def import_runs(tmp_path_factory, capped):
    d = tmp_path_factory.mktemp("import_bombs")
    jobs = _jobs(d)
    runs = capped({k: (argv, api) for k, (argv, api, _) in jobs.items()}, d, REFUSE_STEPS)
    return {k: (runs[k], jobs[k][2]) for k in jobs}


def _job_keys() -> list[str]:
    keys = [f"onnx_{k}" for k in ONNX_BOMBS] + list(PT2_BOMBS)
    keys += ["onnx_lowered_fold_limit", "onnx_lowered_node_limit", "onnx_lowered_byte_limit",
             "run_model_onnx_bomb_respects_the_limit_flag", "onnx_external_data_is_a_fifo"]
    keys += [f"import_{kind}_{suffix}" for kind in ("dev_zero", "dev_urandom", "fifo")
             for suffix in ("onnx", "pt2", "json")]
    keys += ["run_model_fifo_onnx", "run_model_dev_zero_json", "import_socket_onnx", "import_symlink_loop_onnx",
             "hw_validate_fifo", "run_hw_dev_urandom", "sweep_spec_fifo", "sweep_spec_dev_zero",
             "simulate_schedule_fifo", "simulate_schedule_dev_zero", "api_load_graph_fifo",
             "graph_file_records_an_unknown_pass",
             "api_graph_file_unknown_pass_after_a_known_one"]
    return keys


KEYS = _job_keys()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("key", KEYS)
def test_hostile_model_input_is_refused_in_one_paragraph_within_the_memory_cap(key, import_runs, hostile):
    run, words = import_runs[key]
    text = run.out + run.err
    assert run.code is not None, f"{key}: {run.note}; output:\n{text[-2000:]}"
    assert "Traceback" not in text and "MemoryError" not in text, f"{key}: traceback:\n{text[-3000:]}"
    assert run.code == 1, f"{key}: exit {run.code} (expected 1: refused); output:\n{text[-2000:]}"
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, f"{key}: the refusal is not one paragraph:\n{run.err[-3000:]}"
    hostile.names(run.err, *words)


@pytest.mark.timeout(60)
def test_every_job_has_a_test(tmp_path):
    assert sorted(KEYS) == sorted(_jobs(tmp_path))
    assert len(KEYS) >= 40
