"""Helpers shared by the CLI commands: argument types, the hardware, model and step options (one default
for each, the same on every command), limit options, output paths, JSON output and the stdout console."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Sequence

import yaml

from rich.console import Console

from accelsim import models
from accelsim.cli.progress import phase
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.limits import DEFAULT_LIMITS, DEFAULT_READ_LIMITS, Limits, ReadLimits
from accelsim.safe_file import special_target
from accelsim.training import OPTIMIZERS, training_graph

DEFAULT_HW = "groq_like"
"""The bundled hardware every command uses when --hw is not given (a saved schedule brings its own)."""

STEP_RULE = ("Every command works on the model's training step (forward + backward + optimizer update) unless "
             "--inference is given.")
"""The one rule on training vs inference, quoted in each command's help."""

# ---- argument types: argparse prints usage and the message, and exits 2 ---------------------------


def positive_int(text: str) -> int:
    """An integer >= 1 written in decimal (`8`, `1_000`); refuses 2.5, 0, -1, 1e3 and empty strings."""
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (>= 1), got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A finite number; refuses inf, nan and empty strings."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def exact_seconds_arg(text: str) -> float:
    """--exact's budget: seconds above 0, finite, at most a day (exact_step.MAX_EXACT_SECONDS)."""
    from accelsim.schedule.options import MAX_EXACT_SECONDS

    value = finite_float(text)
    if not 0 < value <= MAX_EXACT_SECONDS:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most {MAX_EXACT_SECONDS:g}, got {text!r}")
    return value


def path_arg(text: str) -> str:
    """A file or directory name: not empty (an empty name would silently mean 'the default')."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return text


def remat_arg(text: str) -> Any:
    """--remat POLICY: none, sqrt, every:K, full:K or budget:BYTES (accelsim.remat.parse_policy), checked here so a
    bad value exits 2 with argparse's usage line."""
    from accelsim.remat import parse_policy

    try:
        return parse_policy(text)
    except AccelsimError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def apply_remat(graph: Graph, args: argparse.Namespace) -> Graph:
    """The step rematerialized as --remat says (unchanged without it); refused for --inference."""
    policy = getattr(args, "remat", None)
    if policy is None:
        return graph
    if getattr(args, "inference", False):
        raise AccelsimError(f"--remat {policy.label} recomputes activations a training step keeps for its backward "
                            "pass; an --inference step has none: drop --remat or --inference")
    from accelsim.remat import rematerialize

    return rematerialize(graph, policy)


# ---- model options ---------------------------------------------------------------------------------


def add_model_args(p: argparse.ArgumentParser, step: bool = True, batch_help: str = "batch size") -> None:
    """--model, --batch, --set; with `step`, --training/--inference and the optimizer's options too."""
    p.add_argument("--model", default=models.DEFAULT_MODEL,
                   help=f"model of the zoo (default {models.DEFAULT_MODEL}): {', '.join(models.names())}; "
                        "`accelsim models` lists each one's options; or a model file: an accelsim graph "
                        "(.json, from `accelsim import`), a torch.export program (.pt2) or an ONNX model (.onnx)")
    p.add_argument("--batch", type=positive_int, help=f"{batch_help} (the model's `batch` option)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any model option, e.g. --set layers=2 --set seq=128 --set sizes=64,32,10; repeatable")
    add_read_limit_args(p)
    if step:
        add_step_kind_args(p)
        add_optimizer_args(p)


def add_step_kind_args(p: argparse.ArgumentParser) -> None:
    """--training (the default) or --inference: which graph of the model a command works on."""
    kind = p.add_mutually_exclusive_group()
    # both write args.inference; --training's default must be False too (argparse takes the first default)
    kind.add_argument("--training", dest="inference", action="store_false", default=False,
                      help="the training step: forward + backward + optimizer update (the default; the flag is "
                           "kept for older command lines)")
    kind.add_argument("--inference", dest="inference", action="store_true",
                      help="the inference graph instead (forward pass without the loss), not the training step")


def add_optimizer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                   help="the training step's parameter update (default sgd); ignored with --inference")
    p.add_argument("--lr", type=finite_float, default=0.01, help="learning rate of the update (default 0.01)")


def _set_value(item: str, text: str) -> Any:
    """The YAML scalar, or list of scalars, of one --set item (yaml.safe_load: no Python tags)."""
    try:
        value = yaml.safe_load(text)
    except RecursionError:  # PyYAML composes nested flow collections recursively
        raise AccelsimError(f"--set {item[:60]!r}...: the value is nested too deeply; expected a number, a word "
                            "or a flat list like [16, 8]") from None
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        mark = getattr(e, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark is not None else ""
        raise AccelsimError(f"--set {item!r}: the value is not a plain YAML scalar or list ({problem}{where})") \
            from None
    if isinstance(value, dict):
        raise AccelsimError(f"--set {item!r}: the value is a mapping; expected a number, a word or a list like [16, 8]")
    parts = value if isinstance(value, list) else [value]
    for part in parts:
        if isinstance(part, (list, dict)):
            raise AccelsimError(f"--set {item!r}: the value is nested; expected a number, a word or a flat list "
                                f"like [16, 8]")
        if isinstance(part, float) and not math.isfinite(part):
            raise AccelsimError(f"--set {item!r}: the value is not finite; expected a finite number")
    return value


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """--set KEY=VALUE items as a dict; each key an identifier given once, each value a scalar or flat list."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AccelsimError(f"--set expects KEY=VALUE, got {item!r}")
        if not key.isidentifier():
            raise AccelsimError(f"--set {item!r}: {key!r} is not an option name (letters, digits and _)")
        if key in out:
            raise AccelsimError(f"--set {key} is given twice ({given[key]!r} and {item!r}); give each option once")
        out[key], given[key] = _set_value(item, text), item
    return out


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    opts = parse_set(args.set)
    if args.batch is not None:
        if "batch" in opts:
            raise AccelsimError(f"--batch {args.batch} and --set batch={opts['batch']!r} both set the batch; "
                                "give one")
        opts["batch"] = args.batch
    return opts


MODEL_FILE_SUFFIXES = (".json", ".pt2", ".onnx")
"""--model values read as model files (accelsim.frontends.load_model) rather than zoo names."""


def is_model_file(model: str) -> bool:
    return Path(model).suffix.lower() in MODEL_FILE_SUFFIXES


def model_label(args: argparse.Namespace) -> str:
    """--model as default file names use it: a zoo name, or a model file's stem."""
    return Path(args.model).stem if is_model_file(args.model) else args.model


def _model_file(args: argparse.Namespace, forced: dict[str, Any]) -> Graph:
    """The forward graph in the model file --model names; its shapes are the file's, so --batch, --set and
    --tensor-parallel do not apply."""
    from accelsim.frontends import load_model

    given = [flag for flag, on in (("--batch", args.batch is not None), ("--set", bool(args.set)),
                                   ("--tensor-parallel", getattr(args, "tensor_parallel", 1) > 1), ("a model option", bool(forced)))
             if on]
    if given:
        raise AccelsimError(f"--model {args.model} is a model file, whose shapes and options were fixed when it was "
                            f"exported; only zoo models take {', '.join(given)} (re-export the model instead)")
    return load_model(args.model, limits=read_limits_from(args))


def forward_model(args: argparse.Namespace, evaluates: bool = True, **forced: Any) -> Graph:
    """The forward graph of --model with --batch and --set (and `forced` options over them), built for
    --tensor-parallel ranks where that is above 1 (the model's tensor_parallel option); or the graph of
    a model file (.json, .pt2, .onnx) as it is. `evaluates`: the command computes the graph's numbers,
    so the zoo builder's evaluation limit applies (False: shapes only, models.build(limits=None))."""
    if is_model_file(args.model):
        return _model_file(args, forced)
    opts = zoo_options(args, **forced)
    return models.build(args.model, **opts) if evaluates else models.build(args.model, limits=None, **opts)


def zoo_options(args: argparse.Namespace, **forced: Any) -> dict[str, Any]:
    """The options forward_model builds zoo model --model with: --batch, --set, `forced`, and
    --tensor-parallel as the model's tensor_parallel option."""
    opts = {**model_options(args), **forced}
    t = getattr(args, "tensor_parallel", 1)
    if t > 1:
        if "tensor_parallel" not in models.options(args.model):
            able = [m for m in models.names() if "tensor_parallel" in models.options(m)]
            raise AccelsimError(f"--tensor-parallel {t}: model {args.model!r} has no tensor-parallel build; "
                                f"models that have one: {', '.join(able)}")
        if opts.get("tensor_parallel", t) != t:
            raise AccelsimError(f"--tensor-parallel {t} and --set tensor_parallel={opts['tensor_parallel']} "
                                "disagree; give one")
        opts["tensor_parallel"] = t
    return opts


def step_graph(args: argparse.Namespace, evaluates: bool = True) -> Graph:
    """The training step of --model (the default; rematerialized by --remat where the command has it) or,
    with --inference, its inference graph; `evaluates` as forward_model's."""
    from accelsim.passes import inference_graph

    with phase(f"building the model ({args.model})"):
        fwd = forward_model(args, evaluates)
    if getattr(args, "inference", False):
        return apply_remat(inference_graph(fwd), args)  # refuses --remat
    with phase("autodiff: building the training step"):
        graph = training_graph(fwd, optimizer=args.optimizer, lr=args.lr)
    return apply_remat(graph, args)


def step_name(args: argparse.Namespace) -> str:
    """"train" or "infer": which graph of the model --training/--inference asked for."""
    return "infer" if getattr(args, "inference", False) else "train"


# ---- hardware ---------------------------------------------------------------------------------------


def add_hw_args(p: argparse.ArgumentParser, default: str = f"default {DEFAULT_HW}") -> None:
    """--hw (optional everywhere; `default` says what it defaults to) and --hw-set beside it."""
    p.add_argument("--hw", type=path_arg, metavar="HW",
                   help=f"hardware YAML file or bundled name, e.g. tpu_v1_like ({default})")
    add_hw_set_arg(p)


def load_hw_arg(args: argparse.Namespace, default: str = DEFAULT_HW) -> HwSpec:
    """The hardware of --hw (or `default`) with its --hw-set overrides."""
    from accelsim.hw import load_hw
    from accelsim.hw.overrides import parse_assignments

    return load_hw(args.hw or default, overrides=parse_assignments(getattr(args, "hw_set", [])))


# ---- output -------------------------------------------------------------------------------------------


def out_console() -> Console:
    """The console commands print tables and lines on (stdout). Into a pipe or a file, lines are never
    wrapped (a grep finds a whole phrase); on a terminal rich fits them to its width. No markup: names
    and values print as they are."""
    probe = Console(highlight=False)
    if probe.is_terminal:
        return Console(highlight=False, markup=False, emoji=False)
    return Console(highlight=False, markup=False, emoji=False, soft_wrap=True, width=100_000)


# ---- limits on the work one command builds ----------------------------------------------------------


def add_limit_args(p: argparse.ArgumentParser, tasks: bool = True, flops: bool = False) -> None:
    """--max-tasks (with `tasks`), --max-bytes and --max-flops (with `flops`): accelsim.limits.Limits."""
    if tasks:
        p.add_argument("--max-tasks", type=positive_int, default=DEFAULT_LIMITS.max_tasks, metavar="N",
                       help=f"refuse a step estimated above N tasks (default {DEFAULT_LIMITS.max_tasks:,})")
    p.add_argument("--max-bytes", type=positive_int, default=DEFAULT_LIMITS.max_tensor_bytes, metavar="N",
                   help=f"refuse evaluating tensors estimated above N bytes (default "
                        f"{DEFAULT_LIMITS.max_tensor_bytes:,} = {DEFAULT_LIMITS.max_tensor_bytes / 2**30:g} GiB)")
    if flops:
        p.add_argument("--max-flops", type=positive_int, default=DEFAULT_LIMITS.max_flops, metavar="N",
                       help=f"refuse finite differences estimated above N FLOPs (default "
                            f"{int(DEFAULT_LIMITS.max_flops):,})")


def add_read_limit_args(p: argparse.ArgumentParser) -> None:
    """--max-model-bytes, --max-folded-elements, --max-model-nodes: accelsim.limits.ReadLimits for model files."""
    d = DEFAULT_READ_LIMITS
    p.add_argument("--max-model-bytes", type=positive_int, default=d.max_file_bytes, metavar="N",
                   help=f"refuse a model file (.onnx with its external data, or .pt2 unpacked) above N bytes "
                        f"(default {d.max_file_bytes:,} = {d.max_file_bytes / 2**30:g} GiB)")
    p.add_argument("--max-folded-elements", type=positive_int, default=d.max_folded_elements, metavar="N",
                   help=f"refuse an ONNX model whose constant folding would compute a value above N elements "
                        f"(default {d.max_folded_elements:,})")
    p.add_argument("--max-model-nodes", type=positive_int, default=d.max_nodes, metavar="N",
                   help=f"refuse an ONNX graph above N nodes once its functions are inlined (default {d.max_nodes:,})")


def read_limits_from(args: argparse.Namespace) -> ReadLimits:
    d = DEFAULT_READ_LIMITS
    return ReadLimits(max_file_bytes=getattr(args, "max_model_bytes", d.max_file_bytes),
                      max_folded_elements=getattr(args, "max_folded_elements", d.max_folded_elements),
                      max_nodes=getattr(args, "max_model_nodes", d.max_nodes))


def limits_from(args: argparse.Namespace) -> Limits:
    return Limits(max_tasks=getattr(args, "max_tasks", DEFAULT_LIMITS.max_tasks),
                  max_tensor_bytes=getattr(args, "max_bytes", DEFAULT_LIMITS.max_tensor_bytes),
                  max_flops=getattr(args, "max_flops", DEFAULT_LIMITS.max_flops))


# ---- output files -------------------------------------------------------------------------------------


def add_json_arg(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument("--json", metavar="FILE", type=path_arg, help=f"also write {what} as JSON")


def _parent_file(path: Path) -> Path | None:
    """The first existing ancestor of `path` that is not a directory (nothing can be written below it)."""
    return next((p for p in path.parents if p.exists() and not p.is_dir()), None)


def _check_path_text(path: str, option: str) -> None:
    """A NUL byte cannot stand in a file name (the OS call raises ValueError): only main() called from Python can
    pass one, and it gets the same one-paragraph refusal as any other bad target."""
    if "\x00" in path:
        raise AccelsimError(f"{option} {path!r}: a file name cannot contain a NUL byte")


def check_file_target(path: str | None, option: str) -> None:
    """Refuse, before any work, an output file that is an existing directory or lies below a file."""
    if path is None:
        return
    _check_path_text(path, option)
    kind = special_target(path)
    if kind == "a directory":
        raise AccelsimError(f"{option} {path}: is a directory; expected a file name")
    if kind is not None:
        raise AccelsimError(f"{option} {path}: is {kind}, not a regular file; expected a file name to write")
    blocker = _parent_file(Path(path))
    if blocker is not None:
        raise AccelsimError(f"{option} {path}: {blocker} is an existing file, not a directory")


def check_dir_target(path: str | None, option: str) -> None:
    """Refuse, before any work, an output directory that is an existing file or lies below a file."""
    if path is None:
        return
    _check_path_text(path, option)
    blocker = Path(path) if Path(path).exists() and not Path(path).is_dir() else _parent_file(Path(path))
    if blocker is not None:
        raise AccelsimError(f"{option} {path}: {blocker} is an existing file, not a directory")


def write_problem(path: str | Path, e: OSError) -> str:
    """Why writing `path` failed, in words: the OS's reason, or the file that stands where a directory must."""
    blocker = _parent_file(Path(path))
    return f"{blocker} is a file, not a directory" if blocker is not None else (e.strerror or str(e))


def plain_json(value: Any) -> Any:
    """`value` with every non-finite float written as the string "nan", "inf" or "-inf": JSON has no
    such numbers, and Python's NaN/Infinity literals break other readers."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    return value


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    if path is None:
        return
    check_file_target(path, "--json")
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(plain_json(payload), indent=2, sort_keys=False, allow_nan=False) + "\n")
    except OSError as e:
        raise AccelsimError(f"cannot write JSON to {path!r}: {write_problem(path, e)}") from None


def add_hw_set_arg(p: argparse.ArgumentParser) -> None:
    """--hw-set KEY=VALUE, beside every --hw (hw/overrides.py)."""
    p.add_argument("--hw-set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one value of the hardware before it is validated, by key path (units, memories "
                        "and chips by name or index; the value is YAML), e.g. --hw-set chips.0.units.mxu.array."
                        "rows=128; repeatable; recorded in the schedule")
