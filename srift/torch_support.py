"""Which GPUs the user's PyTorch can run: the official wheels of each release, per CUDA variant.

PyTorch's official Linux wheels (``download.pytorch.org/whl/cuNNN``, PyPI) carry kernels for a
list of compute capabilities per CUDA variant; ``srift/data/torch_wheels.json`` (schema
``srift.torch-wheels/1``, dated, sources per release) holds that list. One DDP job runs one
PyTorch build on every rank, so a cluster runs when one variant runs every GPU in it.

Note "wheel runs GPU": a GPU of compute capability M.m runs a variant when the variant has a
cubin (SASS) of the same major M and a minor no greater than m (an sm_86 cubin runs on 8.9, the
L4 and L40S), or PTX for a capability no greater than M.m (PTX is compiled for the GPU when
loaded). A GPU whose capability the catalog does not know is taken to run every variant.

The target release is, in order: the ``torch=`` argument (``--torch``), the profile's
``torch_version``, the installed torch; an argument with a CUDA label (``"2.13.0+cu126"``) counts
that variant alone (note "pinned variant"). ``"source"`` (a build from source, or any custom build,
such as a version with a ``+git`` label) turns the check off: every GPU runs. A release newer
than the table is read as its newest row, with a TorchSupportWarning saying so; one older than
the table is refused.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from srift.files import read_input_text, unique_keys

if TYPE_CHECKING:
    from srift.catalog import Catalog
    from srift.profile_data import Profile

__all__ = ["SCHEMA", "TABLE_PATH", "SOURCE", "TorchSupportWarning", "WheelVariant", "TorchRelease",
           "TorchTarget", "SUPPORT_LEVELS", "load_table", "parse_capability", "resolve_target", "preferred_wheel",
           "install_line", "describe"]

SCHEMA = "srift.torch-wheels/1"
# A variant's place in its release, as PyTorch's CUDA support-matrix RFCs name it: "default" is
# the one PyPI serves (one per release at most).
SUPPORT_LEVELS = ("default", "stable", "legacy", "experimental")
TABLE_PATH = Path(__file__).resolve().parent / "data" / "torch_wheels.json"
SOURCE = "source"

_CAPABILITY_RE = re.compile(r"^([1-9][0-9]?)\.([0-9])$")
_RELEASE_RE = re.compile(r"^([0-9]+)\.([0-9]+)$")
_VARIANT_RE = re.compile(r"^cu[0-9]{3,4}$")
# torch.__version__ of an official build: 2.13.0, 2.13.0+cu126, 2.13.0+cpu, 2.16.0.dev20261101+cu130
_VERSION_RE = re.compile(r"^([0-9]+)\.([0-9]+)(?:\.([0-9]+))?((?:a|b|rc)[0-9]+|\.dev[0-9]+)?(?:\+([A-Za-z0-9_.]+))?$")
_OFFICIAL_LABEL_RE = re.compile(r"^(cpu|cu[0-9]{3,4}|rocm[0-9.]+|xpu)$")


class TorchSupportWarning(UserWarning):
    """A cluster no official wheel of the target PyTorch runs, or a release past srift's table."""


def parse_capability(value: Any, where: str) -> tuple[int, int]:
    """(major, minor) of a compute capability written 'MAJOR.MINOR'; ValueError naming ``where``."""
    m = _CAPABILITY_RE.match(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"{where}: expected a compute capability 'MAJOR.MINOR' such as '8.6', got {value!r}")
    return int(m.group(1)), int(m.group(2))


def _text(cap: tuple[int, int]) -> str:
    return f"{cap[0]}.{cap[1]}"


def sm_label(capability: str | None) -> str:
    """A compute capability as an arch name: '8.6' -> 'sm_86', None (unknown) -> 'sm_?'."""
    return f"sm_{(capability or '?').replace('.', '')}"


@dataclass(frozen=True)
class WheelVariant:
    """One CUDA variant of a release's official wheels (cu126, cu130, ...)."""

    name: str
    cuda: str
    sass: tuple[tuple[int, int], ...]
    ptx: tuple[tuple[int, int], ...]
    support: str | None = None  # one of SUPPORT_LEVELS; None where the table's sources do not say
    # the cubins of the variant's Linux aarch64 build (an arm64 host: g5g's Graviton2); None
    # where the table's sources do not list them apart: taken as the x86_64 build's
    aarch64_sass: tuple[tuple[int, int], ...] | None = None

    def runs(self, capability: str | None, cpu_arch: str = "x86_64") -> bool:
        """Note "wheel runs GPU": a cubin of the same major and a minor <= the GPU's, or PTX
        for a capability <= the GPU's; on an arm64 host, the aarch64 build's cubins. None
        (unknown capability): True."""
        if capability is None:
            return True
        return _variant_runs(self, capability, cpu_arch)

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "cuda": self.cuda, "sass": [_text(s) for s in self.sass],
               "ptx": [_text(p) for p in self.ptx]}
        if self.support is not None:
            out["support"] = self.support
        if self.aarch64_sass is not None:
            out["aarch64_sass"] = [_text(s) for s in self.aarch64_sass]
        return out


@lru_cache(maxsize=1024)
def _variant_runs(variant: WheelVariant, capability: str, cpu_arch: str) -> bool:
    """WheelVariant.runs, kept per (variant, capability, host): parsing the capability for each
    GPU of each predicted cluster had been a sixth of a warm srift.predict."""
    cap = parse_capability(capability, "compute_capability")
    sass = variant.aarch64_sass if cpu_arch == "arm64" and variant.aarch64_sass is not None else variant.sass
    return (any(s[0] == cap[0] and s[1] <= cap[1] for s in sass)
            or any(p <= cap for p in variant.ptx))


@dataclass(frozen=True)
class TorchRelease:
    """One release's row of the table."""

    torch: str
    status: str
    variants: tuple[WheelVariant, ...]
    sources: tuple[str, ...]

    @property
    def key(self) -> tuple[int, int]:
        major, minor = self.torch.split(".")
        return int(major), int(minor)


@dataclass(frozen=True)
class WheelTable:
    as_of: str
    releases: tuple[TorchRelease, ...]
    origin: str


def _parse_table(doc: Any, origin: str) -> WheelTable:
    def fail(where: str, expected: str, got: Any) -> ValueError:
        return ValueError(f"{origin}: {where}: expected {expected}, got {got!r}")

    if not isinstance(doc, dict):
        raise fail("$", "an object", doc)
    if doc.get("schema") != SCHEMA:
        raise fail("schema", repr(SCHEMA), doc.get("schema"))
    as_of = doc.get("as_of")
    try:
        _dt.date.fromisoformat(as_of)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise fail("as_of", "a date YYYY-MM-DD", as_of) from None
    rows = doc.get("releases")
    if not isinstance(rows, list) or not rows:
        raise fail("releases", "a non-empty list", rows)
    releases: list[TorchRelease] = []
    for i, row in enumerate(rows):
        at = f"releases[{i}]"
        if not isinstance(row, dict):
            raise fail(at, "an object", row)
        torch = row.get("torch")
        if not isinstance(torch, str) or not _RELEASE_RE.match(torch):
            raise fail(f"{at}.torch", "a release 'MAJOR.MINOR' such as '2.13'", torch)
        if row.get("status") not in ("released", "announced"):
            raise fail(f"{at}.status", "'released' or 'announced'", row.get("status"))
        sources = row.get("sources")
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.startswith("http")
                                                                   for s in sources):
            raise fail(f"{at}.sources", "a non-empty list of citations, each starting with a URL", sources)
        variants = row.get("variants")
        if not isinstance(variants, list) or not variants:
            raise fail(f"{at}.variants", "a non-empty list", variants)
        parsed: list[WheelVariant] = []
        for j, v in enumerate(variants):
            vat = f"{at}.variants[{j}]"
            if not isinstance(v, dict):
                raise fail(vat, "an object", v)
            name = v.get("name")
            if not isinstance(name, str) or not _VARIANT_RE.match(name):
                raise fail(f"{vat}.name", "a CUDA variant such as 'cu126'", name)
            if name in (p.name for p in parsed):
                raise fail(f"{vat}.name", "a variant named once per release", name)
            cuda = v.get("cuda")
            if not isinstance(cuda, str) or not _RELEASE_RE.match(cuda) or name != "cu" + cuda.replace(".", ""):
                raise fail(f"{vat}.cuda", f"the CUDA version 'MAJOR.MINOR' its name {name!r} says", cuda)
            lists = {}
            for key in ("sass", "ptx", "aarch64_sass"):
                caps = v.get(key)
                if key == "aarch64_sass" and caps is None:
                    lists[key] = None
                    continue
                if not isinstance(caps, list):
                    raise fail(f"{vat}.{key}", "a list of compute capabilities"
                               + (" or absent" if key == "aarch64_sass" else ""), caps)
                lists[key] = tuple(parse_capability(c, f"{origin}: {vat}.{key}[{k}]") for k, c in enumerate(caps))
            if not lists["sass"] and not lists["ptx"]:
                raise fail(f"{vat}.sass", "at least one capability (sass or ptx)", v.get("sass"))
            support = v.get("support")
            if support is not None and support not in SUPPORT_LEVELS:
                raise fail(f"{vat}.support", f"one of {', '.join(SUPPORT_LEVELS)} or absent", support)
            if support == "default" and any(p.support == "default" for p in parsed):
                raise fail(f"{vat}.support", "'default' for one variant per release (PyPI's)", support)
            parsed.append(WheelVariant(name, cuda, lists["sass"], lists["ptx"], support, lists["aarch64_sass"]))
        release = TorchRelease(torch, row["status"], tuple(parsed), tuple(sources))
        if releases and release.key <= releases[-1].key:
            raise fail(f"{at}.torch", f"a release after {releases[-1].torch} (rows oldest first, once each)", torch)
        releases.append(release)
    return WheelTable(as_of, tuple(releases), origin)


@lru_cache(maxsize=8)
def _load_cached(path: str) -> WheelTable:
    text = read_input_text(path)
    try:
        doc = json.loads(text, object_pairs_hook=unique_keys)
    except ValueError as e:
        raise ValueError(f"{path}: not a JSON wheel table: {e}") from None
    return _parse_table(doc, path)


def load_table(path: str | Path | None = None) -> WheelTable:
    """The wheel table at ``path`` (default: the shipped srift/data/torch_wheels.json),
    validated: ValueError naming the field and value."""
    return _load_cached(str(path if path is not None else TABLE_PATH))


# A GPU as the wheel check sees it: its compute capability (None: unknown) and its host's CPU
# architecture ("x86_64", "arm64"): PyTorch's aarch64 wheels carry other cubins.
GpuHost = tuple[str | None, str]


def _host(spec: GpuHost | str | None) -> GpuHost:
    return spec if isinstance(spec, tuple) else (spec, "x86_64")


@dataclass(frozen=True)
class TorchTarget:
    """The PyTorch a plan must run: the table's row for it, or no check (``release`` None)."""

    version: str | None          # as given or recorded ("2.13.0+cu126", "source"); None: unknown
    origin: str                  # "argument", "profile", "installed" or "none"
    release: TorchRelease | None  # None: the check is off (every GPU runs)
    note: str = ""               # why the check is off, or that the release is past the table

    @property
    def checked(self) -> bool:
        return self.release is not None

    def variants_for(self, capabilities: Iterable[GpuHost | str | None]) -> list[WheelVariant]:
        """The variants that run every GPU of these capabilities, each a capability or a
        (capability, host CPU architecture) pair (all of them when unchecked is not asked:
        callers test ``checked`` first)."""
        hosts = [_host(c) for c in capabilities]
        if self.release is None:
            return []
        return [v for v in self.release.variants if all(v.runs(c, a) for c, a in hosts)]

    def why_not(self, gpus: Mapping[str, GpuHost | str | None]) -> str:
        """Why no one variant runs these GPUs (GPU label -> capability, or (capability, host
        CPU architecture)): each GPU's runners."""
        assert self.release is not None
        parts = []
        for gpu, spec in gpus.items():
            cap, arch = _host(spec)
            runs = [v.name for v in self.release.variants if v.runs(cap, arch)]
            parts.append(f"{gpu} ({sm_label(cap)}) runs under "
                         + (", ".join(runs) if runs else "none of them"))
        names = ", ".join(v.name for v in self.release.variants)
        together = "" if len(gpus) == 1 else " together"
        return (f"no official torch {self.release.torch} wheel ({names}) runs "
                f"{' and '.join(gpus)}{together}: " + "; ".join(parts)
                + " (give torch='source' / --torch source for a build of your own)")

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "origin": self.origin,
                "release": None if self.release is None else self.release.torch,
                "checked": self.checked, "note": self.note}


@lru_cache(maxsize=1)
def _installed_torch() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def resolve_target(torch: Any = None, profile: Profile | None = None, *,
                   table: WheelTable | None = None) -> TorchTarget:
    """The target PyTorch: ``torch`` (a version such as '2.13' or '2.13.0+cu126', 'source',
    or a TorchTarget), else the profile's ``torch_version``, else the installed torch."""
    if isinstance(torch, TorchTarget):
        return torch
    table = table or load_table()
    if torch is not None:
        if not isinstance(torch, str) or not torch.strip():
            raise ValueError(f"torch: expected a PyTorch version such as '2.13' or 'source', got {torch!r}")
        version, origin = torch.strip(), "argument"
    elif profile is not None and getattr(profile, "torch_version", None):
        version, origin = str(profile.torch_version), "profile"
    else:
        installed = _installed_torch()
        if installed is None:
            return TorchTarget(None, "none", None, "no PyTorch version known (none given, none in the profile, "
                                                   "none installed): every GPU is taken to run")
        version, origin = installed, "installed"
    target, newer_note = _resolve_version(version, origin, table)
    if newer_note:
        warnings.warn(newer_note, TorchSupportWarning, stacklevel=2)
    return target


@lru_cache(maxsize=64)
def _resolve_version(version: str, origin: str, table: WheelTable) -> tuple[TorchTarget, str]:
    """resolve_target's reading of a version against the table, kept per (version, origin,
    table): srift.predict calls it for every cluster, and reading it afresh had been a fifth of a
    warm call. Returns the target and the past-the-table note to warn with ("" when none), so
    the warning is given on every call, as before, not on the first alone."""
    if version.lower() == SOURCE:
        return TorchTarget(SOURCE, origin, None, "a build of your own (torch='source'): every GPU is taken to "
                                                 "run"), ""
    m = _VERSION_RE.match(version)
    if m is None:
        if origin == "argument":
            raise ValueError(f"torch: expected a PyTorch version such as '2.13' or '2.13.0+cu126', or 'source' "
                             f"for a build of your own, got {version!r}")
        return TorchTarget(version, origin, None, f"torch {version} is no official release's version: "
                                                  "taken as a build of your own, every GPU runs"), ""
    label = m.group(5)
    if label is not None and not _OFFICIAL_LABEL_RE.match(label):
        return TorchTarget(version, origin, None, f"torch {version} is a custom build (+{label}): every GPU is "
                                                  "taken to run"), ""
    key = (int(m.group(1)), int(m.group(2)))
    first, newest = table.releases[0], table.releases[-1]
    if key < first.key:
        raise ValueError(f"torch: {version!r} ({origin}) is older than srift's wheel table, which starts at "
                         f"{first.torch}: give torch='source' (--torch source) to turn the check off")
    pin = label if origin == "argument" and label is not None and _VARIANT_RE.match(label) else None
    for release in table.releases:
        if release.key == key:
            return TorchTarget(version, origin, _pinned(release, pin, version)), ""
    if key > newest.key:
        note = (f"torch {version} is newer than srift's wheel table (newest {newest.torch}, as of "
                f"{table.as_of}): its wheels are taken as {newest.torch}'s")
        release = _pinned(newest, pin, version)
        return TorchTarget(version, origin, release, note), note
    raise ValueError(f"torch: {version!r} ({origin}) is no release in srift's wheel table "
                     f"({', '.join(r.torch for r in table.releases)})")


def _pinned(release: TorchRelease, variant: str | None, version: str) -> TorchRelease:
    """Note "pinned variant": a version given as the argument with a CUDA label
    (``torch="2.13.0+cu126"``, ``--torch 2.13.0+cu126``) names the build the training runs, so
    only that variant counts; the label of a profile's or the installed torch's version names
    the machine that profiled, not the cluster's build, and pins nothing (nor do +cpu, +rocm,
    +xpu: no CUDA variant). ValueError naming the version when the release has no such variant."""
    if variant is None:
        return release
    kept = tuple(v for v in release.variants if v.name == variant)
    if not kept:
        raise ValueError(f"torch: {version!r} names the CUDA variant {variant}, and torch {release.torch} has "
                         f"no official {variant} wheel ({', '.join(v.name for v in release.variants)}): give "
                         f"one of those, the release alone ('{release.torch}') or 'source'")
    return replace(release, variants=kept)


INDEX_URL = "https://download.pytorch.org/whl/"


def _variants_of(release: str) -> dict[str, WheelVariant]:
    """The shipped table's variants of a release row ("2.13"), by name; empty if it has none."""
    for row in load_table().releases:
        if row.torch == release:
            return {v.name: v for v in row.variants}
    return {}


def preferred_wheel(release: str, wheels: list[str]) -> str:
    """Of the variants that run a plan, the one to install: PyPI's default, else a stable one,
    else one whose support the table does not record, else legacy, else experimental; the newest
    CUDA among equals. The first runner had been offered, so an A10G plan under 2.13 was told to
    install the legacy CUDA 12.6 build rather than PyPI's CUDA 13.0 one."""
    by_name = _variants_of(release)
    rank = {level: i for i, level in enumerate(("default", "stable", None, "legacy", "experimental"))}

    def key(name: str) -> tuple[int, tuple[int, int]]:
        v = by_name.get(name)
        if v is None:
            return len(rank), (0, 0)
        major, minor = v.cuda.split(".")
        return rank[v.support], (-int(major), -int(minor))

    return min(wheels, key=key)


def install_line(release: str | None, wheels: list[str] | None, version: str | None = None) -> str | None:
    """The pip line that installs the official wheel variant to use for a plan
    (`preferred_wheel`): plain ``pip install "torch==2.13.*"`` for PyPI's default variant, else
    from download.pytorch.org/whl/cuNNN; None when no variant runs it or the check is off.
    ``version``, the target's own (``"2.16"``), names the release to install where it is past the
    table and ``release`` (the newest row) only stands in for its wheels: a 2.16 user had been
    told to install 2.15."""
    if release is None or not wheels:
        return None
    wheel = preferred_wheel(release, wheels)
    variant = _variants_of(release).get(wheel)
    m = _VERSION_RE.match(version) if version else None
    pin = f"{m.group(1)}.{m.group(2)}" if m else release
    if variant is not None and variant.support == "default":
        return f'pip install "torch=={pin}.*"  # {wheel}, PyPI\'s default build'
    return f'pip install "torch=={pin}.*" --index-url {INDEX_URL}{wheel}'


def describe(pred: Any) -> str | None:
    """One line on a prediction's PyTorch wheels (report, export), None when unchecked."""
    release, wheels = getattr(pred, "torch_release", None), getattr(pred, "torch_wheels", None)
    if release is None or wheels is None:
        return None
    if not wheels:
        return f"PyTorch: {pred.torch_note}"
    return (f"PyTorch: the official torch {release} wheel{'s' if len(wheels) > 1 else ''} "
            f"{', '.join(wheels)} run{'' if len(wheels) > 1 else 's'} every GPU of it: "
            f"{install_line(release, wheels, getattr(pred, 'torch_version', None))}")


def gpu_label(catalog: Catalog, instance_type: str) -> str:
    """The wheel check's name for an instance type's GPU: its key, with its host when that is
    arm64 ("T4 on arm64": a g5g's T4 runs other wheels than a g4dn's)."""
    inst = catalog.instance(instance_type)
    return inst.gpu if inst.cpu_arch == "x86_64" else f"{inst.gpu} on {inst.cpu_arch}"


def gpu_capabilities(catalog: Catalog, instance_types: Iterable[str]) -> dict[str, GpuHost]:
    """GPU label (`gpu_label`) -> (compute capability, host CPU architecture) of these instance
    types, in their order, once each."""
    out: dict[str, GpuHost] = {}
    for name in instance_types:
        inst = catalog.instance(name)
        out.setdefault(gpu_label(catalog, name), (catalog.gpu(inst.gpu).compute_capability, inst.cpu_arch))
    return out
