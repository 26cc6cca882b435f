"""The ``srift`` command line: profile, predict, recommend, pareto (and the subcommands that
other modules register: catalog, validate, train, probe-network, ...)."""
from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import sys
import warnings
from contextlib import nullcontext as _nothing
from typing import Any, Callable, Sequence

from srift import checks, jsonout, report
from srift.files import check_output_path

__all__ = ["main", "build_parser", "parse_duration_hours"]

# Modules that add their own subcommands through `register(subparsers)`.
_COMMAND_MODULES = ("srift.cli_catalog", "srift.cli_validate", "srift.cli_learn", "srift.cli_sweep")

_DURATION = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(s|sec|m|min|h|hr|d|day|days|w)?\s*$",
                       re.IGNORECASE)
_UNIT_HOURS = {"s": 1 / 3600, "sec": 1 / 3600, "m": 1 / 60, "min": 1 / 60, "h": 1, "hr": 1,
               "d": 24, "day": 24, "days": 24, "w": 168}


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line and a hint, as every other mistake is (README "The
    command line"): argparse printed its whole usage block (15-20 lines for predict or
    recommend) above the line that says what was wrong, and no hint. Subparsers inherit it."""

    def error(self, message: str) -> Any:  # argparse's signature: it never returns
        self.exit(2, f"{self.prog}: error: {message}\nhint: `{self.prog} --help` lists the options\n")


_LOOKS_LIKE_INSTANCE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+(?::\w+)?$", re.IGNORECASE)


def _unrecognized(args: argparse.Namespace, extra: Sequence[str]) -> str:
    """The hint for words argparse did not take: most often a value with spaces left unquoted
    (`--cluster 2x g4dn.12xlarge` leaves `g4dn.12xlarge` over)."""
    if any(_LOOKS_LIKE_INSTANCE.match(word) or word == "+" or word.startswith("@") for word in extra):
        if getattr(args, "held", None) is not None:
            return "a value with spaces needs quotes, e.g. --held \"2x p3.16xlarge @us-east-1\""
        return "a value with spaces needs quotes, e.g. --cluster \"2x p3.16xlarge + 4x g4dn.12xlarge:spot\""
    return "check the spelling of each option"


class UserError(Exception):
    """A mistake in the command line: printed as one line with a hint, no traceback."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


# The "schema" field of the --json documents (format and version; validate writes
# srift.validate-report/1, catalog show srift.catalog-show/1). Every other key is as before.
PREDICTION_SCHEMA = "srift.prediction/1"
RECOMMENDATION_SCHEMA = "srift.recommendation/1"  # recommend and replan
PARETO_SCHEMA = "srift.pareto/1"

# srift/compute.hpp note "fp32 is PyTorch's"
PRECISION_HELP = ("arithmetic of the training run: fp32 = PyTorch's defaults (matmuls FP32, cuDNN "
                  "convolutions and RNNs on TF32 tensor cores where the GPU has them), tf32 = TF32 "
                  "matmuls too (torch.set_float32_matmul_precision('high')), amp = torch.autocast")


def parse_duration_hours(text: str) -> float:
    """'12h', '90m', '2d', '3600s' or a bare number of hours -> hours."""
    match = _DURATION.match(str(text))
    if match is None:
        raise argparse.ArgumentTypeError(f"duration must look like 12h, 90m, 2d or 3600s (a bare number is "
                                         f"hours), got {text!r}")
    value = float(match[1]) * _UNIT_HOURS[(match[2] or "h").lower()]
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"duration must be finite and > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


def _threads(text: str) -> int:
    """--threads: 0 (the default's "up to 2") or more; -1 was refused by the API as `threads`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 (the default: up to 2) or more threads, got {text!r}")
    return value


def _confidence(text: str) -> float:
    """--confidence: a probability in [0.5, 1); out of range was refused by the API as
    `deadline_confidence`, a name the command line does not use."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability such as 0.9, got {text!r}") from None
    if not 0.5 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0.5, 1), e.g. 0.9, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


MAX_ITERATIONS = checks.MAX_ITERATIONS  # a million years of 30 ms iterations; past it run times are noise


def _iterations(text: str) -> float:
    """--iterations: a number in [1, MAX_ITERATIONS] (1e308 printed 300-digit times and costs;
    1e-322 hung the search, checks.iterations)."""
    value = _positive_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 iteration, got {text!r}")
    if value > MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"expected at most 1e12 iterations, got {text!r}")
    return value


MEASURE_PRECISIONS = ("fp32", "tf32", "amp")


def _split_precision(text: str, form: str, example: str) -> tuple[str, str | None]:
    """TEXT@PRECISION -> (TEXT, precision); TEXT -> (TEXT, None): the run's arithmetic, as
    --precision names it (srift.engine note "measurement precision")."""
    head, at, precision = text.rpartition("@")
    if not at:
        return text, None
    if precision.strip().lower() not in MEASURE_PRECISIONS:
        raise argparse.ArgumentTypeError(f"measurement precision must be one of {', '.join(MEASURE_PRECISIONS)} "
                                         f"after '@' ({form}@PRECISION, e.g. {example}@amp), got {text!r}")
    return head, precision.strip().lower()


def _measurement(text: str) -> tuple[str, int, float]:
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"measurement must be GPU:LOCAL_BATCH:SECONDS (e.g. T4:32:0.21), got {text!r}")
    return parts[0], _positive_int(parts[1]), _positive_float(parts[2])


def _instance_measurement(text: str) -> tuple[str, int, float, str | None]:
    """INSTANCE:LOCAL_BATCH:SECONDS[@PRECISION]: one DDP iteration on a whole instance."""
    body, precision = _split_precision(text, "INSTANCE:LOCAL_BATCH:SECONDS", "p3.16xlarge:32:0.16")
    if len(body.split(":")) != 3:
        raise argparse.ArgumentTypeError("measurement must be INSTANCE:LOCAL_BATCH:SECONDS[@PRECISION] (e.g. "
                                         f"p3.16xlarge:32:0.16 or p3.16xlarge:32:0.16@amp), got {text!r}")
    return (*_measurement(body), precision)


def _gpu_measurement(text: str) -> tuple[str, int, float, int, str | None]:
    """GPU:LOCAL_BATCH:SECONDS, or GPU:LOCAL_BATCH:SECONDS:MICRO_STEPS for an optimizer step
    of that many gradient-accumulation micro-steps; either with @PRECISION (fp32, tf32, amp)
    for the arithmetic the run used."""
    body, precision = _split_precision(text, "GPU:LOCAL_BATCH:SECONDS[:MICRO_STEPS]", "T4:32:0.21")
    if body.count(":") == 2:
        return (*_measurement(body), 1, precision)
    if body.count(":") == 3:
        head, _, steps = body.rpartition(":")
        return (*_measurement(head), _positive_int(steps), precision)
    raise argparse.ArgumentTypeError("measurement must be GPU:LOCAL_BATCH:SECONDS[:MICRO_STEPS][@PRECISION] (e.g. "
                                     f"T4:32:0.21, T4:32:1.7:8 or T4:32:0.21@amp), got {text!r}")


# ---- shared options -------------------------------------------------------------------------
MODEL_HELP = ("a zoo model (see `srift profile --list`) or your own, FILE.py:FACTORY: a function of the local "
              "batch size that returns (model, (inputs, targets), loss_fn)")


def _add_source(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what to train")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help=MODEL_HELP)
    src.add_argument("--profile", dest="profile_path", metavar="FILE", help="a saved profile (JSON)")
    g.add_argument("--batch-size", type=_positive_int, default=None,
                   help="local batch to profile the model at (default: the zoo's; 8 for FILE.py:FACTORY)")
    g.add_argument("--device", default=None,
                   help="cpu, cuda, or meta (FLOPs only, no timing; default: cuda if present, else meta, since "
                        "CPU timings change no GPU prediction)")
    g.add_argument("--precision", choices=("fp32", "tf32", "amp"), default=None,
                   help=PRECISION_HELP + " (default: the profile's)")
    g.add_argument("--accumulate", type=_positive_int, default=1, metavar="N",
                   help="when a cluster's GPUs cannot hold the global batch at once, run it as up to N "
                        "gradient-accumulation micro-steps (the fewest that fit; default 1: such a cluster "
                        "does not run)")
    g.add_argument("--max-local-batch", type=_positive_int, default=None, metavar="N",
                   help="the most samples one GPU runs in a (micro-)step: the per-GPU batch your script "
                        "is written for (default: what fits GPU memory); with --accumulate it sets "
                        "the micro-steps")
    g.add_argument("--measure", type=_gpu_measurement, action="append", default=[],
                   metavar="GPU:BATCH:SECONDS[:MICRO_STEPS][@PRECISION]",
                   help="a single-GPU iteration you timed, e.g. T4:32:0.21 (repeatable); with MICRO_STEPS, "
                        "one optimizer step of that many gradient-accumulation micro-steps of BATCH each, "
                        "e.g. T4:32:1.7:8; @fp32, @tf32 or @amp: the precision the run used (default: the "
                        "one predicted, --precision or the profile's; another than that is an error)")
    g.add_argument("--measure-instance", type=_instance_measurement, action="append", default=[],
                   metavar="INSTANCE:BATCH:SECONDS[@PRECISION]",
                   help="a DDP iteration you timed on all GPUs of one instance, at a local batch per GPU, "
                        "e.g. p3.16xlarge:32:0.16 (repeatable): anchors that instance type, host and "
                        "intra-instance allreduce included; @PRECISION as for --measure")
    _add_ddp(g)
    g.add_argument("--torch", default=None, metavar="X.Y|source",
                   help="the PyTorch release the training runs (e.g. 2.13): only clusters one of its official "
                        "CUDA wheels runs on every GPU are planned, and predict warns of a cluster none runs (default: "
                        "the profile's torch_version, else the installed torch); with a CUDA label (2.13.0+cu126) only "
                        "that build counts; 'source' for a build of your own turns the check off")
    g.add_argument("--catalog", dest="catalog_path", metavar="FILE", help="a catalog JSON (default: bundled)")
    g.add_argument("--catalog-overrides", metavar="FILE", action="append",
                   help="prices, quotas or instances to override (JSON/TOML); repeat to apply several in order")


def _add_ddp(g: Any) -> None:
    """The DDP the user's training code builds (srift.profile's bucket and allreduce options)."""
    g.add_argument("--bucket-cap-mb", type=_positive_float, default=None, metavar="MIB",
                   help="DistributedDataParallel(bucket_cap_mb=...) as your code passes it (default: DDP's 25, "
                        "first bucket 1); a cap above the model's gradients means one allreduce after the backward")
    g.add_argument("--first-bucket-mb", type=_positive_float, default=None, metavar="MIB",
                   help="the first bucket's cap (default: --bucket-cap-mb when given, as DDP does)")
    g.add_argument("--allreduce-dtype", choices=("fp16", "bf16", "fp32", "none"), default=None,
                   help="a DDP communication hook's dtype: fp16 for fp16_compress_hook, bf16 for "
                        "bf16_compress_hook (halves the bytes of FP32 gradients); none: send gradients as they are")
    g.add_argument("--optimizer", choices=("adam", "adamw", "sgd"), default=None,
                   help="the optimizer your training builds (its state takes GPU memory; default adam)")
    g.add_argument("--find-unused-parameters", action="store_true", default=None,
                   help="DistributedDataParallel(find_unused_parameters=True), which a model whose forward leaves "
                        "parameters unused needs: DDP then keeps its buckets in registration order")
    g.add_argument("--no-forward-sync-buffers", dest="forward_sync_buffers", action="store_false", default=None,
                   help="DistributedDataParallel(forward_sync_buffers=False) (broadcast_buffers=False before torch "
                        "2.13): no broadcast of rank 0's buffers before every forward (default: DDP's, which does)")


def _add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON for machines")


def _add_emit(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("launch spec (see docs/tutorial.md)")
    g.add_argument("--emit", choices=("torchrun", "skypilot", "json"), default=None,
                   help="print the plan's launch spec instead of the table: torchrun lines per node, "
                        "a SkyPilot task YAML, or JSON with the per-rank local batches")
    g.add_argument("--emit-to", metavar="FILE", default=None,
                   help="write the launch spec to FILE and print the table as usual")
    g.add_argument("--script", default="train.py", help="training script the launch spec runs (default train.py)")
    g.add_argument("--script-args", default="", help="arguments for the script, one quoted string; write "
                        "--script-args=--amp when it starts with '-' and has no space (argparse would read "
                        "--amp as an option of srift's)")
    g.add_argument("--name", default="srift-train", help="SkyPilot task name")


def _add_space(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("search space")
    g.add_argument("--global-batch", type=_positive_int, required=True, help="samples per iteration, all GPUs")
    g.add_argument("--iterations", type=_iterations, required=True, help="iterations to train (at most 1e12)")
    g.add_argument("--regions", default=None, help="comma-separated regions, or 'all' (default: us-east-1,us-west-2,eu-west-1)")
    g.add_argument("--spot", action="store_true", help="also consider spot instances")
    g.add_argument("--types", default=None, help="only these instance types (comma-separated)")
    g.add_argument("--exclude", default=None, help="never these instance types (comma-separated)")
    g.add_argument("--max-types", type=_positive_int, default=3, help="distinct instance types per plan (default 3)")
    g.add_argument("--max-instances-per-type", type=_positive_int, default=64, help="instances of one type, or your quota (default 64)")
    g.add_argument("--max-instances", type=_positive_int, default=None, help="instances per plan, all types together")
    g.add_argument("--min-gpu-memory", type=_positive_float, default=None, metavar="GIB",
                   help="only GPUs with at least this much memory")
    g.add_argument("--checkpoint-gbps", type=_positive_float, default=1.0, metavar="GB/S",
                   help="spot: checkpoint write/read bandwidth in GB/s (default 1)")
    g.add_argument("--provisioning", type=parse_duration_hours, default=300 / 3600, metavar="DURATION",
                   help="spot: time to replace an interrupted instance (default 5m)")
    g.add_argument("--threads", type=_threads, default=None, help="search threads (default: up to 2)")


def _add_question(p: argparse.ArgumentParser) -> None:
    goal = p.add_argument_group("the question")
    goal.add_argument("--deadline", type=parse_duration_hours, default=None, help="e.g. 12h, 90m, 2d")
    goal.add_argument("--budget", type=_positive_float, default=None, help="total USD")
    goal.add_argument("--max-usd-per-hour", type=_positive_float, default=None, help="hourly rate cap, USD/h")
    goal.add_argument("--confidence", type=_confidence, default=None, metavar="P",
                      help="meet the deadline with this probability, 0.5 to 1 (e.g. 0.9), under the "
                           "prediction's p10-p90 band and spot preemption together")
    goal.add_argument("--time-limit", type=_positive_float, default=None, metavar="SECONDS",
                      help="stop the search early with the best plan and its optimality gap")
    goal.add_argument("--top", type=_positive_int, default=5, help="plans to show (default 5)")
    p.add_argument("--explain", action="store_true",
                   help="add the best plan's iteration breakdown (compute per group, exposed communication, "
                        "optimizer, bottleneck link) and memory headroom per GPU")


# ---- loading --------------------------------------------------------------------------------
def _catalog(args: argparse.Namespace) -> Any:
    from srift.catalog import Catalog

    catalog = Catalog.load(args.catalog_path) if args.catalog_path else Catalog.default()
    for path in getattr(args, "catalog_overrides", None) or []:  # in order: a later file wins
        catalog = catalog.with_overrides(path)
    return catalog


def _profile(args: argparse.Namespace) -> Any:
    from srift.profile_data import Profile

    if args.profile_path:
        prof = Profile.load(args.profile_path)
        for flag, value, option in (("--bucket-cap-mb", args.bucket_cap_mb, "bucket_cap_mb=..."),
                                    ("--first-bucket-mb", args.first_bucket_mb, "first_bucket_mb=..."),
                                    ("--find-unused-parameters", getattr(args, "find_unused_parameters", None),
                                     "find_unused_parameters=True"),
                                    ("--optimizer", getattr(args, "optimizer", None), "optimizer=...")):
            if value is not None:
                raise UserError(f"{flag} applies when profiling (--model); a saved profile's buckets and optimizer "
                                f"state are fixed: re-profile with --model or srift.profile(..., {option})")
        if args.allreduce_dtype is not None:
            prof.allreduce_dtype = None if args.allreduce_dtype == "none" else args.allreduce_dtype
        if getattr(args, "forward_sync_buffers", None) is not None:
            prof.forward_sync_buffers = args.forward_sync_buffers
    else:
        prof = _profile_zoo(args.model, args.batch_size, args.device, args.precision or "fp32", quiet=args.json,
                            ddp=_ddp_options(args), optimizer=args.optimizer, for_gpu_prediction=True)
    if not (args.measure or args.measure_instance):
        return prof
    catalog = _catalog(args)  # once for both flags (overrides are a file read)
    predicted = args.precision or prof.precision
    for device, batch, secs, steps, precision in args.measure:
        run = f"{device}:{batch}:{secs:g}" + (f":{steps}" if steps > 1 else "")
        _check_measure_precision("--measure", run, precision, predicted, args.precision)
        if not catalog.resolve_gpu(device):
            instance = _instance_or_none(catalog, device)
            if instance is not None:  # the tutorial's "e.g. on a g4dn.xlarge": a run names its GPU here
                raise UserError(f"--measure {run}: {device!r} is an instance type; --measure takes the GPU the run "
                                f"used ({instance.gpu})",
                                hint=f"--measure {instance.gpu}:{batch}:{secs:g} for a run on one GPU"
                                     + (f", or --measure-instance {instance.name}:{batch}:{secs:g} for a DDP "
                                        f"iteration on all its {int(instance.gpu_count)} GPUs"
                                        if instance.gpu_count > 1 else ""))
            catalog.gpu(device)  # a GPU the catalog does not know would be ignored: raise, with suggestions
        with _naming("--measure", run):
            prof.add_measurement(device, local_batch=batch, iteration_s=secs, source="cli", accumulation_steps=steps,
                                 precision=precision or predicted)
    for name, batch, secs, precision in args.measure_instance:
        run = f"{name}:{batch}:{secs:g}"
        _check_measure_precision("--measure-instance", run, precision, predicted, args.precision)
        if _instance_or_none(catalog, name) is None and catalog.resolve_gpu(name):
            raise UserError(f"--measure-instance {run}: {name!r} is a GPU; --measure-instance takes the instance "
                            "type whose GPUs all ran the DDP iteration",
                            hint=f"--measure {name}:{batch}:{secs:g} for a run on one GPU, or --measure-instance "
                                 f"INSTANCE:{batch}:{secs:g} (e.g. p3.16xlarge) for a whole instance")
        it = catalog.instance(name)
        with _naming("--measure-instance", run):
            prof.add_measurement(it.name, local_batch=batch, iteration_s=secs, source="cli", gpus=int(it.gpu_count),
                                 precision=precision or predicted)
    return prof


def _instance_or_none(catalog: Any, name: str) -> Any:
    try:
        return catalog.instance(name)
    except (KeyError, ValueError):
        return None


class _naming:
    """Re-raises a ValueError from a flag's value with the flag and value in front:
    `iteration_s: expected seconds in [1e-06, 1e+07]` did not say which --measure it was."""

    def __init__(self, flag: str, value: str):
        self.prefix = f"{flag} {value}: "

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        if isinstance(exc, ValueError) and not isinstance(exc, UserError) and not str(exc).startswith(self.prefix):
            raise ValueError(self.prefix + str(exc)) from exc
        return False


def _check_measure_precision(flag: str, run: str, precision: str | None, predicted: str,
                             asked: str | None) -> None:
    """A run given on the command line at another precision than the one the command predicts
    is refused (srift.engine note "measurement precision"): the prediction could not use it, so
    the flag would do nothing. A run without @PRECISION is taken at the predicted precision."""
    if precision is None or precision == predicted:
        return
    why = f"--precision {asked}" if asked else f"the profile's precision, {predicted}"
    raise UserError(f"{flag} {run}@{precision}: a run timed at {precision} cannot anchor a "
                    f"prediction at {predicted} ({why}): srift anchors only on runs at the precision it predicts",
                    hint=f"predict at the run's precision (--precision {precision}), or give a run timed at "
                         f"{predicted} (@{predicted})")


def _ddp_options(args: argparse.Namespace) -> dict[str, Any]:
    """srift.profile's DDP options from --bucket-cap-mb, --first-bucket-mb, --allreduce-dtype,
    --find-unused-parameters and --no-forward-sync-buffers.
    As in DDP, an explicit bucket cap also sizes the first bucket unless that is given too."""
    out: dict[str, Any] = {}
    if args.bucket_cap_mb is not None:
        out["bucket_cap_mb"] = out["first_bucket_mb"] = args.bucket_cap_mb
    if args.first_bucket_mb is not None:
        out["first_bucket_mb"] = args.first_bucket_mb
    if args.allreduce_dtype not in (None, "none"):
        out["allreduce_dtype"] = args.allreduce_dtype
    if getattr(args, "find_unused_parameters", None):
        out["find_unused_parameters"] = True
    if getattr(args, "forward_sync_buffers", None) is not None:
        out["forward_sync_buffers"] = args.forward_sync_buffers
    return out


USER_MODEL_BATCH = 8  # --model FILE.py:FACTORY without --batch-size


def _profile_zoo(name: str, batch_size: int | None, device: str | None, precision: str, *,
                 quiet: bool, warmup: int = 2, repeats: int = 5, ddp: dict[str, Any] | None = None,
                 optimizer: str | None = None, for_gpu_prediction: bool = False) -> Any:
    """Profile a zoo model or FILE.py:FACTORY. Without --device: on CUDA when there is a GPU;
    else, when the profile only feeds GPU predictions (`for_gpu_prediction`: predict, recommend,
    replan, pareto), on meta, as sweeps do: the engine reads a CPU profile's FLOPs, bytes and
    buckets, never its CPU timings (Engine._ready_fractions, _anchors), so timing the model on
    the CPU would cost a minute and change no answer. A user model that meta cannot run
    (data-dependent shapes, .item()) is profiled on the CPU instead."""
    import torch

    from srift import user_model, zoo
    from srift.profiler import MAX_PROFILE_BATCH, check_device, profile

    own = user_model.is_model_file(name)
    batch_size = batch_size or (USER_MODEL_BATCH if own else int(zoo.info(name).get("default_batch_size", 8)))
    if batch_size > MAX_PROFILE_BATCH:
        raise UserError(f"--batch-size {batch_size}: more than one GPU's local batch srift profiles "
                        f"({MAX_PROFILE_BATCH}); profile a smaller batch (the per-sample costs scale)")
    meta_instead_of_cpu = device is None and for_gpu_prediction and not torch.cuda.is_available()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else ("meta" if meta_instead_of_cpu else "cpu")
    check_device(device)  # before building a model that may take minutes
    if not quiet:
        why = (" (FLOPs, bytes, DDP buckets: there is no CUDA GPU here, and CPU timings would change no GPU "
               "prediction; --device cpu times them anyway)" if meta_instead_of_cpu else "")
        print(f"profiling {name} at local batch {batch_size} on {device}{why} ...", file=sys.stderr)
    try:
        if own:
            model, batch, loss_fn, label = user_model.build(name, batch_size)
        else:
            model, batch, loss_fn = zoo.build(name, batch_size=batch_size,
                                              device="meta" if device == "meta" else "cpu")
            label = name
    except (MemoryError, RuntimeError) as exc:  # the batch does not fit this machine's memory
        if "alloc" not in str(exc).lower() and not isinstance(exc, MemoryError):
            raise
        raise UserError(f"building {name} at local batch {batch_size} on this machine failed ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200]}); profile a smaller --batch-size or --device meta") from exc
    def run(on: str) -> Any:
        # what the user's factory built failed to profile (its batch, loss, forward): say which --model
        with _naming("--model", repr(name)) if own else _nothing():
            return profile(model, batch, loss_fn=loss_fn, device=on, precision=precision,
                           optimizer=optimizer or "adam", warmup=warmup, repeats=repeats, name=label,
                           progress=not quiet and sys.stderr.isatty(), **(ddp or {}))

    if not (meta_instead_of_cpu and own):
        return run(device)
    try:
        return run("meta")
    except Exception as exc:  # noqa: BLE001 - any failure on meta: the CPU run raises the model's own error
        if not quiet:
            print(f"{name} does not run on meta ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
                  f"profiling on cpu ...", file=sys.stderr)
        return run("cpu")


CLUSTER_EXAMPLE = "2x p3.16xlarge + 4x g4dn.12xlarge:spot"


def _cluster(flag: str, text: str) -> Any:
    """--cluster / --held as a Cluster. Instance types, markets and regions are case-insensitive
    everywhere else (`--exclude P3.2XLARGE`, `:SPOT`), so `2X G4DN.12XLARGE` is read as its
    lower case; a group that still does not parse is named with the form and an example."""
    from srift.cluster import Cluster

    try:
        return Cluster.parse(text)
    except ValueError as exc:
        try:
            return Cluster.parse(text.lower())
        except ValueError:
            pass
        comma = "; join groups with '+', not ','" if "," in text else ""
        what = str(exc).replace(f" (in cluster {text!r})", "")  # the flag's value leads the line already
        raise UserError(f"{flag} {text!r}: {what}{comma}",
                        hint=f"a group is COUNTx TYPE[:spot], groups joined by ' + ', an optional @REGION at the "
                             f"end: e.g. {flag} \"{CLUSTER_EXAMPLE}\"") from None


def _emit(args: argparse.Namespace, payload: dict[str, Any], text: Callable[[], str]) -> None:
    if args.json:
        print(jsonout.dumps(payload))
    else:
        print(text())


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


# ---- commands -------------------------------------------------------------------------------
def _cmd_profile(args: argparse.Namespace) -> int:
    from srift import zoo

    if args.list:
        rows = [(n, f"{zoo.info(n).get('params', 0) / 1e6:.1f}M", zoo.info(n).get("task", "")) for n in zoo.names()]
        print(report.table(rows, ["model", "params", "task"], right=[1]))
        return 0
    if not args.model:
        raise UserError("give --model NAME or --model FILE.py:FACTORY (or --list to see the zoo)")
    if args.output:
        check_output_path(args.output, "-o")
    prof = _profile_zoo(args.model, args.batch_size, args.device, args.precision or "fp32", quiet=args.json,
                        warmup=args.warmup, repeats=args.repeats, ddp=_ddp_options(args), optimizer=args.optimizer)
    if args.output:
        prof.save(args.output)

    def text() -> str:
        t = prof.timings
        sent = f", all-reduced as {prof.allreduce_dtype}" if prof.allreduce_dtype else ""
        frozen = (f" ({report.data_size(prof.trainable_param_bytes)} of {report.data_size(prof.param_bytes)} "
                  "trainable)" if prof.trainable_param_bytes < prof.param_bytes else "")
        n_buckets = len(prof.buckets)
        lines = [f"{prof.model}: {prof.param_count / 1e6:.2f} M parameters{frozen}, {len(prof.layers)} layers, "
                 f"{n_buckets} DDP bucket{'s' if n_buckets != 1 else ''} "
                 f"({report.data_size(prof.gradient_bytes())}{sent}), profiled on {prof.device}",
                 f"forward {report.flops(prof.total_forward_flops())}/sample, backward "
                 f"{report.flops(prof.total_backward_flops())}/sample, activations "
                 f"{report.data_size(prof.activation_bytes_per_sample)}/sample"]
        messages = prof.broadcast_bytes()
        if messages:
            lines.append(f"buffers {report.data_size(sum(messages))}, broadcast by DDP before every forward "
                         f"in {len(messages)} message{'s' if len(messages) > 1 else ''} (--no-forward-sync-buffers "
                         "if your DDP does not)")
        elif prof.buffer_bytes and not prof.forward_sync_buffers:
            lines.append("buffers not broadcast (forward_sync_buffers=False)")
        if t is not None:
            rows = [(b, report.seconds(f), report.seconds(bw), report.seconds(it))
                    for b, f, bw, it in zip(t.batch_sizes, t.forward_s, t.backward_s, t.iteration_s)]
            lines += ["", report.table(rows, ["local batch", "forward", "backward", "iteration"], right=[0, 1, 2, 3]),
                      f"optimizer step {report.seconds(t.optimizer_s)} (medians of {t.repeats} after {t.warmup} "
                      f"warm-up, at {prof.precision}: predictions at another precision do not use these times)"]
        if args.output:
            lines.append(f"saved to {args.output}")
        return "\n".join(lines)

    _emit(args, prof.to_dict(), text)
    return 0


def _prediction_text(pred: Any) -> str:
    return report.prediction_text(pred)


def _emit_script_args(args: argparse.Namespace) -> list[str] | None:
    """The launch-spec options checked (None without --emit): the same mistakes are exit 2
    whether or not the plan runs."""
    if not args.emit:
        if args.emit_to:
            raise UserError("--emit-to needs --emit torchrun|skypilot|json")
        return None
    if args.emit_to:  # before the search: a missing folder was a bare "[Errno 2] ..." after it
        check_output_path(args.emit_to, "--emit-to")
    import shlex

    try:
        script_args = shlex.split(args.script_args)
    except ValueError as exc:
        raise UserError(f"--script-args {args.script_args!r} is not valid shell words: {exc}") from None
    if args.json and args.emit != "json" and not args.emit_to:
        raise UserError("--json and --emit torchrun/skypilot both write stdout", hint="add --emit-to FILE")
    return script_args


def _write_emit(args: argparse.Namespace, obj: Any) -> bool:
    """Writes the launch spec if asked; True when it went to stdout (and the table must not)."""
    script_args = _emit_script_args(args)
    if script_args is None:
        return False
    from srift import export

    text = export.emit(obj, args.emit, script=args.script, script_args=script_args, name=args.name)
    if args.emit_to:
        from pathlib import Path

        Path(args.emit_to).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        if not args.json:
            print(f"wrote the {args.emit} launch spec to {args.emit_to}", file=sys.stderr)
        return False
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return True


def _cmd_predict(args: argparse.Namespace) -> int:
    from srift.prediction import predict

    from srift.engine import Engine, EngineConfig

    if args.plot is not None:
        from srift import plots

        plots.check_path(args.plot)  # a bad path is a mistake (2), runnable or not
    cluster = _cluster("--cluster", args.cluster)  # a typo is exit 2 before profiling, not after
    _emit_script_args(args)  # as are --emit-to, --script-args and --json mistakes
    prof = _profile(args)
    catalog = _catalog(args)
    engine = Engine(prof, catalog, EngineConfig(precision=args.precision, max_accumulation_steps=args.accumulate,
                                                max_local_batch=args.max_local_batch))
    pred = predict(prof, cluster, args.global_batch, catalog=catalog, region=args.region,
                   iterations=args.iterations, engine=engine, timeline=args.plot is not None, torch=args.torch)
    payload = {"schema": PREDICTION_SCHEMA, **pred.to_dict()}
    if args.plot is not None:
        from srift import plots

        if not pred.feasible:
            # nothing runs, so there is no timeline: exit 3 as without --plot, not 2 (bad input)
            print(f"srift: no timeline: {pred.cluster} does not run: {pred.why_infeasible}", file=sys.stderr)
            if args.json:
                _emit(args, payload, lambda: "")
            return 3
        plots.save_timeline(pred, args.plot, phases=plots.phase_split(pred, engine))
        if not args.json:
            print(f"wrote the iteration timeline to {args.plot}", file=sys.stderr)
    if args.emit and not pred.feasible:
        # nothing runs, so there is no launch spec: exit 3 as without --emit, not 2 (bad input)
        _emit_script_args(args)
        print(f"srift: no launch spec: {pred.cluster} does not run: {pred.why_infeasible}", file=sys.stderr)
        if args.json:  # a script reading JSON gets a document, not an empty stdout
            _emit(args, payload, lambda: "")
        return 3
    if _write_emit(args, pred):
        return 0
    _emit(args, payload, lambda: report.explain_prediction(pred, catalog) if args.explain
          else "\n".join([_prediction_text(pred), *report.precision_notes(pred, catalog),
                          *(report.torch_lines(pred) if pred.torch_wheels == [] else [])]))
    return 0 if pred.feasible else 3  # the cluster asked about cannot run: the output says why


def _plan_rows(plans: Sequence[Any]) -> list[tuple[Any, ...]]:
    return report.plan_rows(plans)


_PLAN_HEADERS = report.PLAN_HEADERS
_PLAN_RIGHT = report.PLAN_RIGHT


def _space_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    from srift.planning import SpotAssumptions

    return dict(global_batch=args.global_batch, iterations=args.iterations, regions=args.regions,
                markets=("on-demand", "spot") if args.spot else ("on-demand",),
                instance_types=_split(args.types), exclude=_split(args.exclude), max_types=args.max_types,
                max_instances_per_type=args.max_instances_per_type, precision=args.precision,
                min_gpu_memory_gib=args.min_gpu_memory, threads=args.threads,
                max_accumulation_steps=args.accumulate, max_local_batch=args.max_local_batch,
                torch=args.torch, spot_assumptions=SpotAssumptions(write_gbytes_s=args.checkpoint_gbps, read_gbytes_s=args.checkpoint_gbps,
                                                 provisioning_s=args.provisioning * 3600))


def _warn_unplanned_types(args: argparse.Namespace, catalog: Any) -> None:
    """recommend, replan and pareto plan current types only (Catalog.offers); one the user names
    in --types that is retired or unlisted was dropped without a word, and the answer then said
    "none of the offers ... is of the types asked", though `predict` prices it."""
    for text in _split(args.types) or []:
        it = _instance_or_none(catalog, text)
        if it is not None and it.status != "current":
            warnings.warn(f"--types {it.name}: a {it.status} (previous-generation) type, which {args.command} does "
                          f"not plan; `srift predict --cluster \"1x {it.name}\"` still prices one", stacklevel=2)


def _recommend_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    _emit_script_args(args)  # --emit-to, --script-args and --json mistakes before profiling and the search
    if args.confidence is not None and args.deadline is None:
        raise UserError("--confidence is the probability of meeting --deadline: give --deadline too "
                        "(--budget alone asks for the fastest plan, which has no deadline to meet)")
    return dict(max_instances=args.max_instances, deadline_confidence=args.confidence,
                time_limit_s=args.time_limit,
                held=None if getattr(args, "held", None) is None else _cluster("--held", args.held))


def _cmd_recommend(args: argparse.Namespace) -> int:
    from srift.planning import recommend
    from srift.torch_support import sm_label

    if args.deadline is None and args.budget is None and args.max_usd_per_hour is None:
        raise UserError("give --deadline (cheapest plan that meets it) or --budget / --max-usd-per-hour "
                        "(fastest plan within it)")
    question = _recommend_kwargs(args)  # --held and --confidence mistakes before profiling
    prof = _profile(args)
    catalog = _catalog(args)
    _warn_unplanned_types(args, catalog)
    rec = recommend(prof, deadline_hours=args.deadline, budget_usd=args.budget,
                    max_usd_per_hour=args.max_usd_per_hour, catalog=catalog, top_k=args.top,
                    **_space_kwargs(args), **question)
    why = (report.why_best(rec.best, rec.alternatives, rec.objective, top_k=args.top)
           if rec.best is not None else None)
    if args.emit:
        if rec.best is None:
            print(f"srift: no plan fits: {rec.why_none}", file=sys.stderr)
            if args.json:  # a script reading JSON gets a document, not an empty stdout
                payload = {"schema": RECOMMENDATION_SCHEMA, **rec.to_dict()}
                payload["why"] = None
                _emit(args, payload, lambda: "")
            return 3
        if _write_emit(args, rec.best):
            return 0

    def text() -> str:
        s = rec.search
        # a budget or hourly cap set beside the deadline binds the cheapest plan too
        limits = [x for x in (rec.budget_usd and f"at most {report.usd(rec.budget_usd)} in all",
                              rec.max_usd_per_hour and f"at most {report.usd(rec.max_usd_per_hour)}/h") if x]
        goal = (f"cheapest plan finishing {report.count(rec.iterations)} iterations within {report.hours(rec.deadline_hours)}"
                + "".join(f", {x}" for x in limits)
                if rec.objective == "min_cost" else
                f"fastest plan for {report.count(rec.iterations)} iterations within "
                + " and ".join(x for x in (rec.budget_usd and report.usd(rec.budget_usd),
                                           rec.max_usd_per_hour and report.usd(rec.max_usd_per_hour) + "/h") if x))
        exactness = ("optimal" if s.optimal else
                     f"stopped early ({'time limit' if args.time_limit else 'interrupted'}): "
                     + (f"within {s.gap:.1%} of the optimum" if math.isfinite(s.gap) else
                        "no plan found yet, so no bound on the optimum")
                     )
        head = (f"{prof.model}, global batch {rec.global_batch}, {rec.precision}: {goal}\n"
                f"searched {s.space:,.3g} plans over {s.offers} offers in {len(s.regions)} region(s) "
                f"({', '.join(s.markets)}) in {s.seconds * 1e3:.0f} ms: simulated {s.evaluated:,}, "
                f"pruned the rest by bounds; {exactness}")
        if rec.best is None:
            lines = [head, "", f"no plan fits: {rec.why_none}"]
            if rec.closest is not None:
                lines += [f"closest ({report.usd(rec.closest.usd_per_hour)}/h):", report.plan_table([rec.closest])]
            return "\n".join(lines)
        b = rec.best
        lines = [head, "", report.plan_table([b, *rec.alternatives]), "",
                 f"best plan: {b.cluster} ({b.prediction.workers} GPU{'s' if b.prediction.workers != 1 else ''}): {report.interval(b.prediction, b.total_hours)}, "
                 f"{report.usd(b.total_usd)} at {report.usd(b.usd_per_hour)}/h",
                 f"why: {why}"]
        if rec.deadline_hours and not math.isfinite(b.deadline_probability):
            lines.append("deadline: met as predicted; the chance of meeting it is unknown (the prediction "
                         "has no p10-p90 band)")
        elif rec.deadline_hours:
            p90_hours = b.band_hours()[1]
            thresholds = (0.9, args.confidence) if args.confidence else (0.9,)
            chance = (f"it meets the {report.hours(rec.deadline_hours)} deadline with probability "
                      f"{report.chance(b.deadline_probability, *thresholds)} under its p10-p90 band"
                      f"{' and preemption' if b.uses_spot else ''}"
                      + (f" (p90 {report.hours(p90_hours)})" if math.isfinite(p90_hours) else ""))
            if args.confidence:
                lines.append(f"deadline: {chance}; asked for {args.confidence * 100:g}%")
            elif b.deadline_probability < 0.9:
                lines.append(f"caution: {chance}, as predicted but not with 90% confidence; --confidence 0.9 "
                             f"asks for a plan that is (the band is held-out measurements' spread; --explain)")
        if b.uses_spot:
            lines.append(
                f"spot: {b.interruptions_per_hour * 24 * 30:.2f} interruptions/month expected across the plan, "
                f"{b.expected_interruptions:.2f} in this run; "
                + (f"checkpoint every {report.hours(b.checkpoint_interval_hours)} ({b.checkpoint_s:.1f} s each)"
                   if b.checkpoint_interval_hours else
                   "no checkpoints (no interruptions expected)" if not b.interruptions_per_hour else
                   "no checkpoints (for a run this short they cost more than the restarts they save)")
                + f", restart {b.restart_s:.0f} s; with preemption alone (the "
                f"prediction taken as exact): expected {report.hours(b.total_hours)} vs "
                f"{report.hours(b.nominal_hours)} uninterrupted, p90 {report.hours(b.preemption_p90_hours)}"
                + (f", P(miss deadline) {b.miss_probability:.1%}" if rec.deadline_hours else ""))
        dropped = rec.torch.get("dropped_gpus") or {}
        if dropped:
            lines.append(f"left out: no official torch {rec.torch['release']} wheel runs "
                         + ", ".join(f"{g} ({sm_label(c)})" for g, c in dropped.items())
                         + " (--torch source turns the check off)")
        if args.explain:
            lines += ["", report.explain_prediction(b.prediction, catalog)]
        else:
            lines += report.precision_notes(b.prediction, catalog)
            lines += report.torch_lines(b.prediction)
            lines.append("(--explain for the iteration breakdown and memory headroom; "
                         "--emit torchrun|skypilot|json to launch it)")
        return "\n".join(lines)

    payload = {"schema": RECOMMENDATION_SCHEMA, **rec.to_dict()}
    payload["why"] = why
    _emit(args, payload, text)
    return 0 if rec.best is not None else 3


def _cmd_pareto(args: argparse.Namespace) -> int:
    from srift.planning import pareto

    if args.plot is not None:
        from srift import plots

        plots.check_path(args.plot)  # before profiling and searching: a bad path is a mistake (2), not news after it
    prof = _profile(args)
    catalog = _catalog(args)
    _warn_unplanned_types(args, catalog)
    plans = pareto(prof, catalog=catalog, max_instances=args.max_instances, **_space_kwargs(args))
    if not plans:
        _emit(args, {"schema": PARETO_SCHEMA, "plans": [], "why_none": plans.why_none, "torch": plans.torch},
              lambda: f"no plan runs: {plans.why_none}")
        return 3
    if args.plot is not None:
        from srift import plots

        plots.save_pareto(plans, args.plot, title=f"{prof.model}, global batch {args.global_batch}, "
                                                  f"{report.count(args.iterations)} iterations: time-cost front")
        if not args.json:
            print(f"wrote the time-cost front to {args.plot}", file=sys.stderr)
    _emit(args, {"schema": PARETO_SCHEMA, "plans": [p.to_dict() for p in plans], "torch": plans.torch},
          lambda: (f"{len(plans)} plan{'s' if len(plans) != 1 else ''} on the time-cost front (fastest first)\n"
                   + report.plan_table(plans)))
    return 0


# ---- parser and entry point -----------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from srift import __version__

    parser = _Parser(prog="srift", description="Which cloud GPUs should I rent to train this model?")
    parser.add_argument("--version", action="version", version=f"srift {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("profile", help="profile a zoo model or your own: FLOPs, bytes, timings, DDP buckets")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument("--list", action="store_true", help="list the zoo's models")
    p.add_argument("--batch-size", type=_positive_int, default=None)
    p.add_argument("--device", default=None, help="cpu, cuda, or meta")
    p.add_argument("--precision", choices=("fp32", "tf32", "amp"), default=None, help=PRECISION_HELP)
    p.add_argument("--warmup", type=_positive_int, default=2)
    p.add_argument("--repeats", type=_positive_int, default=5)
    _add_ddp(p.add_argument_group("DDP as your training code builds it"))
    p.add_argument("-o", "--output", help="write the profile JSON here")
    _add_output(p)
    p.set_defaults(func=_cmd_profile)

    p = sub.add_parser("predict", help="iteration time and cost of one cluster")
    _add_source(p)
    p.add_argument("--cluster", required=True, help="e.g. '2x p3.16xlarge + 4x g4dn.12xlarge:spot'")
    p.add_argument("--global-batch", type=_positive_int, required=True)
    p.add_argument("--iterations", type=_iterations, default=None,
                   help="also give the whole run's time and cost (at most 1e12)")
    p.add_argument("--region", default=None, help="default: the cheapest of us-east-1, us-west-2, eu-west-1 (recommend's default regions) pricing every group, else of every region")
    p.add_argument("--explain", action="store_true", help="add where the time goes, the bottleneck link, headroom")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="draw one iteration (compute per group, bucket allreduces) to a PNG/SVG/PDF")
    _add_emit(p)
    _add_output(p)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("recommend", help="cheapest plan within a deadline, or fastest within a budget")
    _add_source(p)
    _add_space(p)
    _add_question(p)
    _add_emit(p)
    _add_output(p)
    p.set_defaults(func=_cmd_recommend)

    p = sub.add_parser("replan", help="the best plan that keeps instances you already hold (e.g. after losing a spot group)")
    _add_source(p)
    _add_space(p)
    p.add_argument("--held", required=True, help="what you still run, e.g. '2x p3.16xlarge @us-east-1'")
    _add_question(p)
    _add_emit(p)
    _add_output(p)
    p.set_defaults(func=_cmd_recommend)

    p = sub.add_parser("pareto", help="every plan not beaten on both time and cost")
    _add_source(p)
    _add_space(p)
    p.add_argument("--plot", metavar="FILE.png", default=None, help="draw the front (time vs cost) to a PNG/SVG/PDF")
    _add_output(p)
    p.set_defaults(func=_cmd_pareto)

    for module_name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(sub)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    print(f"srift: warning: {message}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # as parse_args would refuse them, but naming the command and with a hint
        prog = f"srift {args.command}" if getattr(args, "command", None) else "srift"
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)}\n"
              f"hint: {_unrecognized(args, extra)}; `{prog} --help` lists the options", file=sys.stderr)
        return 2
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    # rich tables only for a person at a terminal; pipes, files and --json get plain text.
    report.use_rich(sys.stdout.isatty() and not getattr(args, "json", False) and "NO_COLOR" not in os.environ)
    try:
        with warnings.catch_warnings():
            if not args.debug:  # a user reads "srift: warning: ...", not the library's file and line
                warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("srift: interrupted" + ("; rerun the same command to resume" if args.command == "sweep" else ""),
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader stopped (`srift ... | head`): not an error; keep Python from reporting
        # the failed flush of what is left at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (UserError, ValueError, IndexError, OSError) as exc:
        if args.debug:
            raise
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"srift: error: {message}", file=sys.stderr)
        hint = getattr(exc, "hint", None)
        print(f"hint: {hint + '; ' if hint else ''}add --debug for the traceback; "
              f"`srift {args.command} --help` lists the options", file=sys.stderr)
        return 2
    finally:
        report.use_rich(False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
