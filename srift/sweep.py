"""``srift sweep``: many models x constraints x regions -> one table.

A spec (YAML or JSON) names the axes; every combination is one ``srift.recommend`` call and
one row of the output (CSV, or Parquet when pyarrow is installed: the same columns, typed,
empty cells as nulls). Rows are keyed by a hash of everything that determines them (profile,
catalog and overrides files by their content, so editing one recomputes its rows), written as
they finish, and skipped when the output already holds them, so an interrupted sweep resumes
where it stopped; a key held twice counts once (the later row). Rows that failed, or were cut
short mid-write, are retried on the next run. Each row is the best plan only.

Spec (every key but ``models``, ``global_batch``, ``iterations`` and ``constraints`` optional)::

    schema: srift.sweep/1        # optional: the format's version (specs without it are read as /1)
    models:                      # zoo names, or mappings
      - resnet50
      - {name: gpt2, batch_size: 4, device: meta}   # batch_size, device: zoo models only
      - {profile: my_model.json}          # a saved profile (profiled at its own batch and device)
    device: meta                 # how zoo models are profiled (default: cuda if present, else meta)
    batch_size: 32               # optional: the batch zoo models are profiled at (default: each model's)
    global_batch: [256, 1024]
    iterations: 100000
    constraints:                 # each: deadline and/or budget and/or max_usd_per_hour
      - {deadline: 12h}
      - {deadline: 12h, confidence: 0.9}  # met with probability 0.9 (band and preemption)
      - {budget: 500}
    regions: [us-east-1, "us-west-2,eu-west-1", all]   # each entry is one search's regions (or a list)
    markets: [on-demand, "on-demand,spot"]
    types: [g4dn.xlarge, p3.2xlarge]     # optional: only these instance types
    exclude: []
    max_types: 2
    max_instances_per_type: 16
    precision: fp32
    max_accumulation_steps: 4    # optional: gradient accumulation where memory runs out (default 1: none)
    max_local_batch: 32          # optional: the most samples one GPU runs per micro-step (default: memory)
    torch: "2.13"                # optional: the PyTorch whose official wheels every plan must run
                                 # (default: each profile's, else the installed; "source": no check)
    catalog: my_catalog.json     # optional; catalog_overrides: FILE too
    output: results.csv

Entries of an axis (models, global_batch, iterations, constraints, regions, markets) must
differ: ``global_batch: [64, 64]`` or ``iterations: [1000, 1e3]`` is refused, naming the repeat.

Engines: ``processes`` (concurrent.futures, ``jobs`` workers) and ``ray`` (an existing Ray
cluster: ``ray.init(address=...)``, or the Ray instance this process already started).
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from srift import _core, checks
from srift.checks import INT_MAX
from srift.engine import PRECISIONS
from srift.files import read_input_bytes, read_input_text

__all__ = ["SweepSpec", "SweepResult", "load_spec", "parse_spec", "tasks", "run_sweep", "run_task", "COLUMNS",
           "ENGINES", "SPEC_SCHEMA"]

SPEC_SCHEMA = "srift.sweep/1"
MAX_TYPES = _core.MAX_GROUPS  # instance types one plan may mix
PRECISION_NAMES = tuple(PRECISIONS)
SUPPORTED_SPEC_SCHEMAS = (SPEC_SCHEMA,)
ENGINES = ("processes", "ray")
COLUMNS = ["key", "model", "global_batch", "iterations", "constraint", "deadline_hours", "budget_usd",
           "max_usd_per_hour", "regions", "markets", "found", "plan", "region", "instances", "gpus",
           "total_hours", "total_hours_p10", "total_hours_p90", "deadline_probability", "total_usd",
           "samples_per_s", "usd_per_hour", "usd_per_1k_samples", "iteration_s", "evaluated", "search_s", "why_none",
           "error"]

_SPEC_KEYS = {"schema", "models", "device", "global_batch", "iterations", "constraints", "regions", "markets",
              "types", "exclude", "max_types", "max_instances_per_type", "precision", "catalog", "catalog_overrides",
              "output", "batch_size", "max_accumulation_steps", "max_local_batch", "torch"}
# A spec nests a few levels; thousands ([[[[...]]]]) exhaust Python's recursion limit.
_TOO_DEEP = "lists or mappings nested too deeply to be a sweep spec"
_CONSTRAINT_KEYS = {"deadline", "budget", "max_usd_per_hour", "confidence"}
_MODEL_KEYS = {"name", "profile", "batch_size", "device"}
_ZOO_ONLY_MODEL_KEYS = ("batch_size", "device")  # how the sweep profiles a zoo model
# Parquet column types (the rest are strings); CSV cells are text, so they are converted at the end.
_INT_COLUMNS = {"global_batch", "instances", "gpus", "evaluated"}
_FLOAT_COLUMNS = {"iterations", "deadline_hours", "budget_usd", "max_usd_per_hour", "total_hours", "total_hours_p10",
                  "total_hours_p90", "deadline_probability", "total_usd", "samples_per_s", "usd_per_hour",
                  "usd_per_1k_samples", "iteration_s", "search_s"}
_BOOL_COLUMNS = {"found"}


# ---- the spec -------------------------------------------------------------------------------
@dataclass
class ModelSpec:
    label: str
    name: str | None = None          # zoo model
    profile: str | None = None       # saved profile path
    batch_size: int | None = None
    device: str | None = None

    def identity(self) -> dict[str, Any]:
        """What determines the profile: for a file, its content hash."""
        if self.profile is not None:
            try:
                digest = hashlib.sha1(read_input_bytes(self.profile)).hexdigest()[:16]
            except OSError as exc:
                raise ValueError(f"profile {self.profile!r}: cannot read ({exc.strerror or exc})") from None
            return {"profile_sha1": digest}
        return {"zoo": self.name, "batch_size": self.batch_size, "device": self.device}


@dataclass
class SweepSpec:
    models: list[ModelSpec]
    global_batch: list[int]
    iterations: list[float]
    constraints: list[dict[str, float]]
    regions: list[str | None]
    markets: list[list[str]]
    types: list[str] | None = None
    exclude: list[str] | None = None
    max_types: int = 2
    max_instances_per_type: int = 16
    precision: str | None = None
    catalog: str | None = None
    catalog_overrides: str | None = None
    output: str | None = None
    max_accumulation_steps: int = 1
    max_local_batch: int | None = None
    torch: str | None = None  # srift.torch_support: the target PyTorch (None: each profile's)
    base_dir: Path = field(default_factory=Path.cwd)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _hours(text: Any, where: str) -> float:
    import argparse

    from srift.cli import parse_duration_hours

    try:
        return parse_duration_hours(str(text))
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _positive_number(value: Any, where: str, integer: bool = False, high: int = INT_MAX) -> Any:
    if isinstance(value, str):
        try:
            value = float(value.replace("_", "")) if not integer else int(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"{where} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where} must be a number > 0, got {value!r}")
    if integer:
        if int(value) != value:
            raise ValueError(f"{where} must be a whole number, got {value!r}")
        if value > high:  # the core's counts are C++ ints; caught here, not row by row
            raise ValueError(f"{where} must be at most {high}, got {value!r}")
        return int(value)
    return float(value)


def _non_empty_list(data: Mapping[str, Any], key: str, default: Any) -> list[Any]:
    """``data[key]`` as a list (``default`` when absent or null); an empty list is refused: the
    sweep is the product of its axes, so it would run nothing and say nothing."""
    value = data.get(key)
    items = _as_list(default if value is None else value)
    if not items:
        raise ValueError(f"{key} must have at least one entry (leave it out for the default), got {value!r}")
    return items


def _refuse_repeats(key: str, given: Sequence[Any], canonical: Sequence[Any],
                    hint: str = "remove one or fix the typo") -> None:
    """ValueError for an axis entry equal to an earlier one (``canonical``: the parsed values):
    the two would be the same rows under one key, computed twice and counted twice in any
    total. Most likely a typo, so it is refused rather than merged."""
    first: dict[Any, int] = {}
    for i, value in enumerate(canonical):
        j = first.setdefault(value, i)
        if j != i:
            earlier = f" = {given[j]!r}" if given[j] != given[i] else ""
            raise ValueError(f"{key}[{i}] = {given[i]!r} repeats {key}[{j}]{earlier}: each entry of an axis must "
                             f"differ; {hint}")


def _check_device(device: Any, where: str) -> None:
    """A zoo model's profiling device, checked when the spec is read: a typo or a GPU this machine
    lacks had surfaced only when the sweep reached that model, under the bare name `device`."""
    from srift.profiler import check_device

    # torch.device(0) is cuda:0; a spec names devices as torch spells them
    if not isinstance(device, str):
        raise ValueError(f"{where} must be a device name such as cpu, meta or cuda:0, got {device!r}")
    try:
        check_device(device)
    except ValueError as e:
        raise ValueError(f"{where}: {e}".replace(f"{where}: device: ", f"{where}: ")) from None


def parse_spec(data: Any, base_dir: str | os.PathLike[str] | None = None) -> SweepSpec:
    """Validates a spec mapping (see the module docstring); ValueError names the key."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    if not isinstance(data, Mapping):
        raise ValueError(f"sweep spec must be a mapping of keys such as models, constraints; got {type(data).__name__}")
    unknown = sorted(set(data) - _SPEC_KEYS)
    if unknown:
        raise ValueError(f"sweep spec key {unknown[0]!r} is unknown; known keys: {', '.join(sorted(_SPEC_KEYS))}")
    # optional, so specs written before the key existed still read as the first version
    version = SPEC_SCHEMA if data.get("schema") is None else data["schema"]
    if version not in SUPPORTED_SPEC_SCHEMAS:
        raise ValueError(f"schema: {version!r} is not a sweep spec version this srift reads; "
                         f"supported: {', '.join(SUPPORTED_SPEC_SCHEMAS)}")
    for required in ("models", "constraints", "global_batch", "iterations"):
        if required not in data or data[required] in (None, [], ""):
            raise ValueError(f"sweep spec needs {required!r} (see `srift sweep --help`)")
    models: list[ModelSpec] = []
    default_batch = data.get("batch_size")
    for i, m in enumerate(_as_list(data["models"])):
        where = f"models[{i}]"
        if isinstance(m, str):
            m = {"name": m}
        if not isinstance(m, Mapping):
            raise ValueError(f"{where} must be a zoo name or a mapping with name or profile, got {m!r}")
        bad = sorted(set(m) - _MODEL_KEYS)
        if bad:
            raise ValueError(f"{where}: key {bad[0]!r} is unknown; known: {', '.join(sorted(_MODEL_KEYS))}")
        if "name" not in m and "profile" not in m:
            raise ValueError(f"{where} needs name (a zoo model) or profile (a saved profile file), got {dict(m)!r}")
        # a name is a row's label and a profile a path: a list, a number or an empty string was
        # read as its str() ("[1, 2]" in the table), and a name of 0 or false as the file's stem
        for key in ("name", "profile"):
            if key in m and (m[key] is not None or key == "profile") and (not isinstance(m[key], str) or not m[key].strip()):
                raise ValueError(f"{where}.{key} must be a non-empty string "
                                 f"({'a zoo model or the label of its rows' if key == 'name' else 'a saved profile file'}), "
                                 f"got {m[key]!r}")
        for key in _ZOO_ONLY_MODEL_KEYS:
            if "profile" in m and key in m:
                raise ValueError(f"{where}.{key}: applies to a zoo model (name without profile), which the sweep "
                                 f"profiles; a saved profile keeps the batch and device it was profiled with, got "
                                 f"{key}: {m[key]!r}")
        batch = m.get("batch_size", default_batch)
        batch = None if batch is None else _positive_number(batch, f"{where}.batch_size", integer=True)
        if "profile" in m:
            path = Path(str(m["profile"]))
            path = path if path.is_absolute() else base / path
            if not path.exists():
                raise FileNotFoundError(f"{where}.profile: {path} does not exist")
            if not path.is_file():  # a directory (or a pipe, which reading would block on)
                raise ValueError(f"{where}.profile: {path} is {'a directory' if path.is_dir() else 'not a file'}, "
                                 "not a saved profile")
            models.append(ModelSpec(label=str(m.get("name") or path.stem), profile=str(path)))
        else:
            from srift import zoo

            name = str(m["name"])
            if name not in zoo.names():
                import difflib

                near = difflib.get_close_matches(name, zoo.names(), n=3)
                raise ValueError(f"{where}: zoo model {name!r} is unknown"
                                 + (f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(zoo.names())}"))
            device = m.get("device", data.get("device"))
            if device is not None:
                _check_device(device, f"{where}.device" if "device" in m else "device")
            models.append(ModelSpec(label=name, name=name, batch_size=batch, device=device))
    # rows are told apart by model name; two models of one name would share keys
    _refuse_repeats("models", _as_list(data["models"]), [m.label for m in models],
                    hint="give each model a distinct name (name: ...)")
    constraints = []
    for i, c in enumerate(_as_list(data["constraints"])):
        where = f"constraints[{i}]"
        if not isinstance(c, Mapping) or not c:
            raise ValueError(f"{where} must be a mapping such as {{deadline: 12h}} or {{budget: 500}}, got {c!r}")
        bad = sorted(set(c) - _CONSTRAINT_KEYS)
        if bad:
            raise ValueError(f"{where}: key {bad[0]!r} is unknown; known: {', '.join(sorted(_CONSTRAINT_KEYS))}")
        out: dict[str, float] = {}
        if "deadline" in c:
            out["deadline_hours"] = _hours(c["deadline"], f"{where}.deadline")
        if "budget" in c:
            out["budget_usd"] = _positive_number(c["budget"], f"{where}.budget")
        if "max_usd_per_hour" in c:
            out["max_usd_per_hour"] = _positive_number(c["max_usd_per_hour"], f"{where}.max_usd_per_hour")
        if "confidence" in c:
            q = c["confidence"]
            if "deadline" not in c:
                raise ValueError(f"{where}.confidence: a confidence needs a deadline in the same constraint")
            if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.5 <= q < 1:
                raise ValueError(f"{where}.confidence must be a number in [0.5, 1), got {q!r}")
            out["deadline_confidence"] = float(q)
        constraints.append(out)
    _refuse_repeats("constraints", _as_list(data["constraints"]), [tuple(sorted(c.items())) for c in constraints])
    markets = []
    given_markets = _non_empty_list(data, "markets", "on-demand")
    for i, m in enumerate(given_markets):
        chosen = [x.strip() for x in str(m).split(",") if x.strip()]
        bad = [x for x in chosen if x not in ("on-demand", "spot")]
        if bad or not chosen:
            raise ValueError(f"markets[{i}] must be on-demand, spot or both (comma-separated), got {m!r}")
        markets.append(chosen)
    _refuse_repeats("markets", given_markets, [frozenset(m) for m in markets])
    regions: list[str | None] = []
    given_regions = _non_empty_list(data, "regions", [None])
    for i, r in enumerate(given_regions):
        given = r
        if isinstance(r, (list, tuple)):  # [us-east-1, us-west-2]: one search over both
            r = ",".join(str(x) for x in r)
        if r is not None and not str(r).strip(" ,"):
            raise ValueError(f"regions[{i}] must name a region, several (a list or comma-separated) or all, "
                             f"got {given!r}")
        regions.append(None if r is None else str(r))
    # the same regions in another order, spacing or case are the same search (their keys would
    # differ; region names are read case-insensitively, as the catalog spells them)
    _refuse_repeats("regions", given_regions,
                    [None if r is None else frozenset(x.strip().lower() for x in r.split(",") if x.strip())
                     for r in regions])

    def names(key: str) -> list[str] | None:
        value = data.get(key)
        if value is None:
            return None
        items = value.split(",") if isinstance(value, str) else [str(v) for v in _as_list(value)]
        chosen = [x.strip() for x in items if x.strip()]
        if not chosen and key == "types":  # no types would mean no plan; leaving the key out means all
            raise ValueError(f"types must name at least one instance type (leave it out for all), got {value!r}")
        return chosen or None

    precision = data.get("precision")
    if precision is not None and precision not in PRECISION_NAMES:
        raise ValueError(f"precision must be one of {', '.join(PRECISION_NAMES)} (or left out: each profile's), "
                         f"got {precision!r}")

    def rel(key: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        path = Path(str(value))
        return str(path if path.is_absolute() else base / path)

    global_batch = [_positive_number(b, "global_batch", integer=True) for b in _as_list(data["global_batch"])]
    _refuse_repeats("global_batch", _as_list(data["global_batch"]), global_batch)
    iterations = [_positive_number(x, "iterations") for x in _as_list(data["iterations"])]
    for it in iterations:
        checks.iterations("iterations", it)  # in [1, MAX_ITERATIONS], as the API and the CLI
    _refuse_repeats("iterations", _as_list(data["iterations"]), iterations)
    return SweepSpec(
        models=models, global_batch=global_batch, iterations=iterations,
        constraints=constraints, regions=regions, markets=markets, types=names("types"), exclude=names("exclude"),
        max_types=_positive_number(data.get("max_types", 2), "max_types", integer=True, high=MAX_TYPES),
        max_instances_per_type=_positive_number(data.get("max_instances_per_type", 16), "max_instances_per_type",
                                                integer=True),
        precision=precision, catalog=rel("catalog"), catalog_overrides=rel("catalog_overrides"),
        output=rel("output"), base_dir=base,
        max_accumulation_steps=_positive_number(data.get("max_accumulation_steps", 1), "max_accumulation_steps",
                                                integer=True),
        max_local_batch=(None if data.get("max_local_batch") is None
                         else _positive_number(data["max_local_batch"], "max_local_batch", integer=True)),
        torch=_torch_version(data.get("torch")))


def _torch_version(value: Any) -> str | None:
    """A spec's ``torch``: a release the wheel table reads ('2.13'; a number such as 2.13 as
    YAML writes it unquoted is refused: 2.10 would read as 2.1), or 'source'; ValueError
    naming it otherwise."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"torch: expected a PyTorch version as a string such as \"2.13\" (quoted: YAML reads "
                         f"2.10 as the number 2.1), or \"source\", got {value!r}")
    from srift.torch_support import resolve_target

    resolve_target(value)  # refuses what the table cannot read, naming it
    return value


def _no_alias_loader(yaml: Any) -> Any:
    """A SafeLoader that refuses YAML aliases: a spec has no need of them, and nested ones
    ("billion laughs") expand a few lines into more lists than memory holds."""

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc, name-defined]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"line {mark.line + 1} column {mark.column + 1}: YAML aliases (*name) are "
                                     "not allowed in a sweep spec; write the values out")
            return super().compose_node(parent, index)

    return NoAliasLoader


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Reads a YAML (or JSON) spec file."""
    import yaml

    path = Path(path)
    try:
        text = read_input_text(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"sweep spec {str(path)!r} does not exist") from None
    except OSError as exc:  # a directory, no permission
        raise ValueError(f"sweep spec {str(path)!r}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"sweep spec {str(path)!r}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_no_alias_loader(yaml))  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:  # the YAML composer recurses once per level of nesting
        raise ValueError(f"{path}: {_TOO_DEEP}") from None
    try:
        return parse_spec(data, base_dir=path.parent)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    except RecursionError:  # e.g. the repr of a deeply nested value in an error message
        raise ValueError(f"{path}: {_TOO_DEEP}") from None


# ---- tasks ----------------------------------------------------------------------------------
def _constraint_text(c: Mapping[str, float]) -> str:
    parts = []
    if "deadline_hours" in c:
        parts.append(f"deadline={c['deadline_hours']:g}h")
    if "deadline_confidence" in c:
        parts.append(f"confidence={c['deadline_confidence']:g}")
    if "budget_usd" in c:
        parts.append(f"budget=${c['budget_usd']:g}")
    if "max_usd_per_hour" in c:
        parts.append(f"rate<=${c['max_usd_per_hour']:g}/h")
    return " ".join(parts)


def _file_identity(path: str | None, key: str) -> str | None:
    """The content hash of the spec's catalog or overrides file (None when not given, so keys
    of sweeps without one stay as they were): a file edited in place, a new negotiated price or
    `srift catalog refresh --out` over it, gives new keys, and its rows are computed again."""
    if path is None:
        return None
    try:
        return hashlib.sha1(read_input_bytes(path)).hexdigest()[:16]
    except OSError as exc:
        raise ValueError(f"{key} {path!r}: cannot read ({exc.strerror or exc})") from None


def tasks(spec: SweepSpec, model_ids: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every combination, as plain dicts (picklable, JSON-able), each with its ``key``."""
    ids = model_ids or {m.label: m.identity() for m in spec.models}
    catalog_id = [_file_identity(spec.catalog, "catalog"), _file_identity(spec.catalog_overrides, "catalog_overrides")]
    out = []
    for m in spec.models:
        for gb in spec.global_batch:
            for it in spec.iterations:
                for c in spec.constraints:
                    for regions in spec.regions:
                        for markets in spec.markets:
                            t = {"model": m.label, "global_batch": gb, "iterations": it, **c,
                                 "regions": regions, "markets": markets, "types": spec.types,
                                 "exclude": spec.exclude, "max_types": spec.max_types,
                                 "max_instances_per_type": spec.max_instances_per_type,
                                 "precision": spec.precision}
                            if spec.max_accumulation_steps != 1:  # keys of older sweeps stay as they were
                                t["max_accumulation_steps"] = spec.max_accumulation_steps
                            if spec.max_local_batch is not None:
                                t["max_local_batch"] = spec.max_local_batch
                            if spec.torch is not None:
                                t["torch"] = spec.torch
                            ident = {**t, "model_id": ids[m.label], "catalog": catalog_id}
                            t["key"] = hashlib.sha1(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
                            out.append(t)
    return out


def run_task(task: Mapping[str, Any], profile: Any, catalog: Any, threads: int | None = 1) -> dict[str, Any]:
    """One recommend call -> one row (errors in the row, never raised)."""
    from srift.planning import recommend

    row: dict[str, Any] = {k: "" for k in COLUMNS}
    row.update(key=task["key"], model=task["model"], global_batch=task["global_batch"],
               iterations=task["iterations"], constraint=_constraint_text(task),
               deadline_hours=task.get("deadline_hours", ""), budget_usd=task.get("budget_usd", ""),
               max_usd_per_hour=task.get("max_usd_per_hour", ""), regions=task["regions"] or "default",
               markets=",".join(task["markets"]))
    start = time.perf_counter()
    try:
        rec = recommend(profile, global_batch=task["global_batch"], iterations=task["iterations"],
                        deadline_hours=task.get("deadline_hours"), budget_usd=task.get("budget_usd"),
                        max_usd_per_hour=task.get("max_usd_per_hour"),
                        deadline_confidence=task.get("deadline_confidence"), catalog=catalog,
                        regions=task["regions"], markets=task["markets"], instance_types=task["types"],
                        exclude=task["exclude"], max_types=task["max_types"],
                        max_instances_per_type=task["max_instances_per_type"], top_k=1,
                        precision=task["precision"], threads=threads,
                        max_accumulation_steps=task.get("max_accumulation_steps"),
                        max_local_batch=task.get("max_local_batch"), torch=task.get("torch"))
    except (ValueError, IndexError) as exc:
        row.update(found=False, error=str(exc), search_s=round(time.perf_counter() - start, 4))
        return row
    plan = rec.best
    row.update(found=plan is not None, why_none=rec.why_none if plan is None else "",
               evaluated=rec.search.evaluated, search_s=round(rec.search.seconds, 4))
    if plan is not None:
        pred = plan.prediction
        p10_hours, p90_hours = plan.band_hours()
        if math.isfinite(p10_hours) and math.isfinite(p90_hours):  # no band under the roofline compute model
            row.update(total_hours_p10=p10_hours, total_hours_p90=p90_hours)
        if task.get("deadline_hours") is not None and math.isfinite(plan.deadline_probability):
            row.update(deadline_probability=plan.deadline_probability)  # NaN: no band (roofline model)
        row.update(plan=" + ".join(str(g) for g in plan.cluster.groups), region=plan.region,
                   instances=plan.cluster.instances, gpus=pred.workers, total_hours=plan.total_hours,
                   total_usd=plan.total_usd, samples_per_s=plan.samples_per_s, usd_per_hour=plan.usd_per_hour,
                   usd_per_1k_samples=plan.usd_per_1k_samples, iteration_s=plan.iteration_s)
    return row


# ---- workers --------------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _worker_init(profiles: Mapping[str, dict[str, Any]], catalog: dict[str, Any] | None) -> None:
    from srift.planning import _Engines

    _WORKER["profiles_raw"] = dict(profiles)
    _WORKER["profiles"] = {}
    _WORKER["catalog_raw"] = catalog
    _WORKER["catalog"] = None
    # Rows of one model (and precision, accumulation, local batch cap) share an Engine: its
    # compute models are a function of the worker's profile, catalog and config alone.
    _WORKER["engines"] = _Engines()


def _worker_objects(model: str) -> tuple[Any, Any]:
    from srift.catalog import Catalog
    from srift.profile_data import Profile

    prof = _WORKER["profiles"].get(model)
    if prof is None:
        prof = _WORKER["profiles"][model] = Profile.from_dict(_WORKER["profiles_raw"][model])
    if _WORKER["catalog"] is None:
        raw = _WORKER["catalog_raw"]
        _WORKER["catalog"] = Catalog.from_dict(raw) if raw is not None else Catalog.default()
    return prof, _WORKER["catalog"]


def _worker_run(task: dict[str, Any]) -> dict[str, Any]:
    from srift.planning import _reusing_engines

    prof, catalog = _worker_objects(task["model"])
    with _reusing_engines(_WORKER["engines"]):
        return run_task(task, prof, catalog, threads=1)


def _ray_run(task: dict[str, Any], profiles: Mapping[str, dict[str, Any]], catalog: dict[str, Any] | None,
             key: str = "") -> dict[str, Any]:
    # A Ray worker process outlives one sweep: set up again for another sweep's documents (`key`
    # is their digest), or it would answer with the last sweep's profiles, catalog and Engines.
    if "profiles_raw" not in _WORKER or _WORKER.get("key") != key:
        _worker_init(profiles, catalog)
        _WORKER["key"] = key
    return _worker_run(task)


# ---- output ---------------------------------------------------------------------------------
class _Output:
    """CSV rows appended as they finish; Parquet through a CSV sidecar converted at the end."""

    def __init__(self, path: Path):
        self.path = path
        self.parquet = path.suffix.lower() == ".parquet"
        if self.parquet:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise ValueError(f"{path}: Parquet output needs pyarrow (pip install pyarrow); "
                                 "or name a .csv output") from None
            self.csv_path = path.with_name(path.name + ".partial.csv")
        elif path.suffix.lower() == ".csv":
            self.csv_path = path
        else:
            raise ValueError(f"output must end in .csv or .parquet, got {str(path)!r}")
        if not path.parent.exists():
            raise FileNotFoundError(f"output folder {str(path.parent)!r} does not exist")

    def existing(self) -> list[dict[str, Any]]:
        """The rows already written, as CSV text, one per key: the later copy where a key is
        held twice (a Parquet run killed after start() copied the file's rows into the sidecar,
        which the next run reads after the file)."""
        rows: list[dict[str, Any]] = []
        if self.parquet and self.path.exists():
            rows += self._parquet_rows()
        if self.csv_path.exists():
            with self.csv_path.open(newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                if reader.fieldnames is not None and reader.fieldnames != COLUMNS:
                    raise ValueError(f"{self.csv_path}: its columns are not a srift sweep table's; "
                                     "name another output or delete it")
                rows += list(reader)
        return list({r["key"]: r for r in rows if r.get("key")}.values())

    def _parquet_rows(self) -> list[dict[str, Any]]:
        """The Parquet file's rows as the CSV writes them: nulls as "", True, 1.5 as text."""
        import pyarrow.parquet as pq

        table = pq.read_table(self.path)
        if table.column_names != COLUMNS:
            raise ValueError(f"{self.path}: its columns are not a srift sweep table's; "
                             "name another output or delete it")
        return [{k: "" if v is None else str(v) for k, v in r.items()} for r in table.to_pylist()]

    def start(self, keep: list[dict[str, Any]]) -> None:
        """Rewrites the CSV with only ``keep`` (drops failed rows so they are retried)."""
        tmp = self.csv_path.with_name(self.csv_path.name + ".tmp")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows({k: r.get(k, "") for k in COLUMNS} for r in keep)
        # For Parquet, the kept rows now live in the sidecar; finish() rewrites the file.
        os.replace(tmp, self.csv_path)
        self._file = self.csv_path.open("a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)

    def write(self, row: Mapping[str, Any]) -> None:
        self._writer.writerow({k: row.get(k, "") for k in COLUMNS})
        self._file.flush()

    def finish(self) -> None:
        self._file.close()
        if self.parquet:
            import pyarrow as pa
            import pyarrow.parquet as pq

            with self.csv_path.open(newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            schema = pa.schema([(c, _arrow_type(pa, c)) for c in COLUMNS])
            table = pa.Table.from_pydict({c: [_typed(c, r[c]) for r in rows] for c in COLUMNS}, schema=schema)
            # written aside and renamed, so a run killed while writing leaves the old file whole
            tmp = self.path.with_name(self.path.name + ".tmp")
            pq.write_table(table, tmp)
            os.replace(tmp, self.path)
            self.csv_path.unlink()


def _arrow_type(pa: Any, column: str) -> Any:
    if column in _BOOL_COLUMNS:
        return pa.bool_()
    if column in _INT_COLUMNS:
        return pa.int64()
    return pa.float64() if column in _FLOAT_COLUMNS else pa.string()


def _typed(column: str, text: str) -> Any:
    """One CSV cell as its Parquet value; an empty cell (no plan, no error, no deadline) is null."""
    if text == "":
        return None
    if column in _BOOL_COLUMNS:
        return text == "True"
    if column in _INT_COLUMNS:
        return int(text)
    return float(text) if column in _FLOAT_COLUMNS else text


def _is_done(row: Mapping[str, Any]) -> bool:
    """A row computed in full, without an error. One cut short mid-write (a crash, a full disk)
    lacks its last cells, which csv reads as None, or its ``found``: it is computed again."""
    return (bool(row.get("key")) and not row.get("error") and row.get("found") in ("True", "False")
            and None not in row and all(row.get(k) is not None for k in COLUMNS))


@dataclass
class SweepResult:
    output: str
    rows: int          # rows in the output now
    computed: int      # rows computed by this run
    skipped: int       # rows already there
    failed: int        # rows of this run with an error
    seconds: float
    engine: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---- the run --------------------------------------------------------------------------------
def _profile_models(spec: SweepSpec, progress: bool) -> dict[str, dict[str, Any]]:
    from srift.profile_data import Profile

    out: dict[str, dict[str, Any]] = {}
    bar = _bar(len(spec.models), "profiling", progress)
    try:
        for m in spec.models:
            if m.profile is not None:
                out[m.label] = Profile.load(m.profile).to_dict()
            else:
                from srift.cli import _profile_zoo

                device = m.device
                if device is None:
                    import torch

                    device = "cuda" if torch.cuda.is_available() else "meta"
                prof = _profile_zoo(m.name, m.batch_size, device, spec.precision or "fp32", quiet=True)
                out[m.label] = prof.to_dict()
            bar.update(1)
    finally:
        bar.close()
    return out


def _bar(total: int, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    # disable=None: on only when stderr is a terminal, so logs and pipes stay clean.
    return tqdm(total=total, desc=desc, unit="row" if desc != "profiling" else "model", file=sys.stderr,
                disable=None if enabled else True, leave=False, dynamic_ncols=True)


def _catalog_dict(spec: SweepSpec) -> dict[str, Any] | None:
    if spec.catalog is None and spec.catalog_overrides is None:
        return None
    from srift.catalog import Catalog

    catalog = Catalog.load(spec.catalog) if spec.catalog else Catalog.default()
    if spec.catalog_overrides:
        catalog = catalog.with_overrides(spec.catalog_overrides)
    return catalog.to_dict()


def _check_names(spec: SweepSpec, catalog_dict: dict[str, Any] | None) -> None:
    """ValueError for a region or instance type the catalog does not know, before any model is
    profiled: every row naming it would fail the same way."""
    from srift.catalog import Catalog
    from srift.planning import resolve_regions

    catalog = Catalog.from_dict(catalog_dict) if catalog_dict is not None else Catalog.default()
    for i, regions in enumerate(spec.regions):
        if regions is not None:
            try:
                resolve_regions(catalog, regions)
            except ValueError as exc:
                raise ValueError(f"regions[{i}]: {exc}") from None
    for key, names in (("types", spec.types), ("exclude", spec.exclude)):
        for name in names or ():
            try:
                catalog.instance(name)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None


def run_sweep(spec: SweepSpec, output: str | os.PathLike[str] | None = None, *, engine: str = "processes",
              jobs: int | None = None, ray_address: str | None = None, progress: bool = True,
              on_row: Callable[[dict[str, Any]], None] | None = None, limit: int | None = None) -> SweepResult:
    """Runs every row of ``spec`` not already in ``output``; returns what it did.

    ``jobs``: worker processes (default: CPUs, at most the rows to run); ``jobs=0`` runs
    in this process. ``limit``: compute at most this many new rows (then stop, resumable)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    path = Path(output or spec.output or "") if (output or spec.output) else None
    if path is None:
        raise ValueError("sweep needs an output file: give -o results.csv or `output:` in the spec")
    out = _Output(path)
    if engine == "ray":
        try:
            import ray
        except ImportError:
            raise ValueError("--engine ray needs Ray installed here (pip install ray) and a running Ray "
                             "cluster; or use --engine processes") from None
    start = time.perf_counter()
    # keyed before the catalog is loaded: a file edited in between gives rows keyed by the old
    # content, recomputed next run, never new-content keys on rows of the old prices
    all_tasks = tasks(spec)
    catalog = _catalog_dict(spec)
    _check_names(spec, catalog)
    keep = [r for r in out.existing() if _is_done(r)]
    done = {r["key"] for r in keep}
    todo = [t for t in all_tasks if t["key"] not in done]
    if limit is not None:
        todo = todo[:limit]
    out.start(keep)
    computed = failed = 0
    try:
        if todo:
            needed = {t["model"] for t in todo}
            profiles = _profile_models(SweepSpec(**{**spec.__dict__, "models": [m for m in spec.models
                                                                                if m.label in needed]}), progress)
            bar = _bar(len(todo), "sweep", progress)
            try:
                for row in _execute(todo, profiles, catalog, engine, jobs, ray_address):
                    out.write(row)
                    computed += 1
                    failed += bool(row.get("error"))
                    bar.update(1)
                    if on_row is not None:
                        on_row(row)
            finally:
                bar.close()
    finally:
        out.finish()
    return SweepResult(output=str(path), rows=len(keep) + computed, computed=computed,
                       skipped=len(all_tasks) - len([t for t in all_tasks if t["key"] not in done]),
                       failed=failed, seconds=time.perf_counter() - start, engine=engine)


def _execute(todo: Sequence[dict[str, Any]], profiles: Mapping[str, dict[str, Any]],
             catalog: dict[str, Any] | None, engine: str, jobs: int | None,
             ray_address: str | None) -> Iterable[dict[str, Any]]:
    if engine == "ray":
        yield from _execute_ray(todo, profiles, catalog, ray_address)
        return
    workers = min(jobs if jobs is not None else (os.cpu_count() or 1), len(todo))
    if workers <= 0 or len(todo) == 1:
        _worker_init(profiles, catalog)
        try:
            for t in todo:
                yield _worker_run(t)
        finally:
            _WORKER.clear()  # the Engines kept for the rows go with the sweep
        return
    import multiprocessing

    # spawn, not fork: the parent may hold torch's and the core's threads.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(dict(profiles), catalog)) as pool:
        pending = {pool.submit(_worker_run, t) for t in todo}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    yield f.result()
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def _execute_ray(todo: Sequence[dict[str, Any]], profiles: Mapping[str, dict[str, Any]],
                 catalog: dict[str, Any] | None, ray_address: str | None) -> Iterable[dict[str, Any]]:
    import ray

    if not ray.is_initialized():
        try:
            ray.init(address=ray_address or "auto", ignore_reinit_error=True, log_to_driver=False)
        except ConnectionError as exc:
            raise ValueError(f"no Ray cluster at {ray_address or 'auto'}: {exc}; start one with "
                             "`ray start --head` or pass --ray-address") from None
    remote = ray.remote(num_cpus=1)(_ray_run)
    profiles_ref = ray.put(dict(profiles))
    catalog_ref = ray.put(catalog)
    key = hashlib.sha256(json.dumps([dict(profiles), catalog], sort_keys=True, default=str).encode()).hexdigest()
    pending = [remote.remote(t, profiles_ref, catalog_ref, key) for t in todo]
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield ray.get(ref)
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        raise
