"""Load learned-model documents: JSON Schema validation, then the core's own checks."""
from __future__ import annotations

import json
import math
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from srift.files import read_input_text

__all__ = ["validate_model_dict", "load_model", "model_from_dict", "model_schema", "read_json", "check_numbers",
           "check_residual_order", "nearest_key", "document_fields", "document_kinds", "check_document_fields",
           "check_reference_specs"]

# Python refuses int(str) of more digits than this (sys.get_int_max_str_digits; 4300 by default).
_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300


class _Refused:
    """What a strict read puts where the text had something a model document may not hold (a
    NaN/Infinity constant, a number out of double range, a duplicate key): check_numbers then
    reports it with its JSON path."""

    def __init__(self, what: str):
        self.what = what


def _strict_float(text: str) -> Any:
    v = float(text)
    return v if math.isfinite(v) else _Refused(f"{text} is out of the range of a double")


def _strict_int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    if digits > _INT_DIGITS:
        return _Refused(f"an integer of {digits} digits is out of the range of a double")
    return int(text)


def _strict_object(pairs: list[tuple[str, Any]]) -> Any:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            # The core's reader keeps the first, Python's the last: one file, two models.
            return _Refused(f"duplicate key {k!r}")
        out[k] = v
    return out


def _json_path(parts: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def check_numbers(doc: Any, origin: str = "learned model") -> None:
    """ValueError naming the JSON path of the first (in document order) NaN, infinity, number out
    of double range or, in a strictly read document, duplicate key."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, _Refused):
            raise ValueError(f"{origin}: {_json_path(path)}: {v.what}")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"{origin}: {_json_path(path)}: {v!r} is not a finite number")
        elif isinstance(v, int):
            if abs(v) > sys.float_info.max:
                raise ValueError(f"{origin}: {_json_path(path)}: an integer of {len(str(abs(v)))} digits is out of "
                                 "the range of a double")
        elif isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend(((*path, i), x) for i, x in reversed(list(enumerate(v))))


def _residual_pairs(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """(JSON path, object) of every p10/p90 pair srift reads from a model document."""
    pairs = [("$.residuals", doc.get("residuals")), ("$.roofline_residuals", doc.get("roofline_residuals")),
             ("$.instance_anchor", doc.get("instance_anchor"))]
    blend = doc.get("absolute_blend")
    if isinstance(blend, dict):
        pairs.append(("$.absolute_blend.residuals", blend.get("residuals")))
    for where, r in list(pairs):
        for part in ("within_lab", "convolved"):
            if isinstance(r, dict) and isinstance(r.get(part), dict):
                pairs.append((f"{where}.{part}", r[part]))
    band = doc.get("scaling_band")  # each cell's p10/p90 (srift.learn.scaling_band band_factors)
    if isinstance(band, dict):
        for scope in ("single_instance", "multi_instance", "probed_single_instance", "probed_multi_instance"):
            if isinstance(band.get(scope), dict):
                pairs.extend((f"$.scaling_band.{scope}.{key}", cell) for key, cell in band[scope].items())
    return pairs


# The core's note "log factor" (csrc/validate.hpp): a residual quantile becomes a band factor
# exp(v); past log(DBL_MAX) either side of 0 that is inf or 0 (math.exp raises OverflowError).
LOG_FACTOR_RULE = "a log factor whose exp() is a finite number > 0 (at most 709.78 either side of 0)"


def is_log_factor(v: float) -> bool:
    """Whether exp(v) and exp(-v) are finite numbers > 0 (the core's detail::is_log_factor)."""
    try:
        return math.isfinite(v) and math.isfinite(math.exp(abs(v)))
    except OverflowError:
        return False


def check_residual_order(doc: dict[str, Any], origin: str = "learned model") -> None:
    """ValueError naming the field and both values where a held-out residual pair has p10 > p90
    (an interval that would silently collapse or invert the prediction band), or naming the
    field and its value where a quantile is no log factor exp() turns into a number (note
    "log factor")."""
    for where, r in _residual_pairs(doc):
        if not isinstance(r, dict):
            continue
        p10, p90 = r.get("p10"), r.get("p90")
        for key, v in (("p10", p10), ("p90", p90)):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not is_log_factor(v):
                raise ValueError(f"{origin}: {where}.{key} = {v!r}: must be {LOG_FACTOR_RULE}")
        nums = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (p10, p90))
        if nums and p10 > p90:
            raise ValueError(f"{origin}: {where}: p10 {p10!r} is above p90 {p90!r}")


@lru_cache(maxsize=1)
def model_schema() -> dict[str, Any]:
    return json.loads(resources.files("srift").joinpath("schemas/learned_model.schema.json").read_text())


@lru_cache(maxsize=1)
def document_kinds() -> dict[str, tuple[str, ...]]:
    """srift's own models by document name, each with the top-level fields a document of that
    kind may hold (the schema's allOf, one if/then a name; the core's
    csrc/learned_document.hpp document_kinds), in the schema's order."""
    out = {}
    for branch in model_schema().get("allOf", []):
        name = branch.get("if", {}).get("properties", {}).get("name", {}).get("const")
        fields = branch.get("then", {}).get("propertyNames", {}).get("enum")
        if isinstance(name, str) and fields is not None:
            out[name] = tuple(sorted(fields))
    return out


def document_fields(name: Any = None) -> tuple[str, ...]:
    """The top-level fields a document named `name` may hold, sorted: a kind of srift's
    (document_kinds), its fields; any other name (a model exported for its own use), a model's
    fields alone; a name that is not a string (the schema then refuses it), every kind's, so that
    a misspelled "nmae" is named as such."""
    if not isinstance(name, str):
        return tuple(sorted(model_schema()["properties"]))
    return document_kinds().get(name) or _other_name_fields()


@lru_cache(maxsize=1)
def _other_name_fields() -> tuple[str, ...]:
    """The top-level fields of a document named none of srift's kinds (the schema's last allOf
    branch: a name not among them)."""
    for branch in model_schema().get("allOf", []):
        cond = branch.get("if", {}).get("properties", {}).get("name", {})
        fields = branch.get("then", {}).get("propertyNames", {}).get("enum")
        if fields is not None and "not" in cond:  # every other name
            return tuple(sorted(fields))
    raise ValueError("learned_model.schema.json: no top-level fields for a document of another name")  # pragma: no cover


def _not_known(key: str, known: Any, name: Any) -> str:
    """How the loader and the core word a top-level key the document's kind does not hold:
    naming the document's kind, the nearest known key and the kinds that do hold it."""
    text = f"{key!r} is not a known field"
    if isinstance(name, str):
        text += f" of a document named {name!r}"
    nearest = nearest_key(key, known)
    if nearest:
        text += f" (did you mean {nearest!r}?)"
    owners = [k for k, fields in document_kinds().items() if key in fields]
    if owners:
        text += f" (a field of {' and '.join(owners)} documents)"
    return text


def check_document_fields(doc: dict[str, Any], origin: str = "learned model") -> None:
    """ValueError naming a top-level key that a document of this kind (its name) does not hold,
    as the core refuses it (csrc/learned_document.hpp document_keys): measured_band belongs in
    compute_absolute, scaling_band in iteration_overhead, and neither in a model of your own."""
    name = doc.get("name")
    known = document_fields(name)
    for key in doc:
        if key not in known:
            raise ValueError(f"{origin}: {_json_path((key,))}: {_not_known(key, known, name)}; "
                             f"known here: {', '.join(known)}")


def check_reference_specs(doc: dict[str, Any], origin: str = "learned model") -> None:
    """ValueError where a dominance_guard's reference_specs is not one entry for each of its
    references exactly (an entry for another GPU, a misspelled key, or a reference without its
    specs), naming the entry, as the core refuses it (csrc/learned_document.hpp guard_keys;
    JSON Schema cannot compare keys with values). CostModels then checks the specs themselves
    against this srift's GPU table."""
    for where, owner in (("$", doc), ("$.absolute_blend", doc.get("absolute_blend"))):
        guard = owner.get("dominance_guard") if isinstance(owner, dict) else None
        if not isinstance(guard, dict):
            continue
        refs, specs = guard.get("references"), guard.get("reference_specs")
        if not (isinstance(specs, dict) and isinstance(refs, list) and all(isinstance(r, str) for r in refs)):
            continue  # the schema names what is wrong there
        at = f"{where}.dominance_guard.reference_specs"
        for key in specs:
            if key not in refs:
                nearest = nearest_key(key, refs)
                hint = f" (did you mean {nearest!r}?)" if nearest else ""
                raise ValueError(f"{origin}: {at}.{key}: {key!r} is not one of references{hint}: reference_specs "
                                 f"holds the specs of each reference and of no other GPU; references: {', '.join(refs)}")
        for ref in refs:
            if ref not in specs:
                raise ValueError(f"{origin}: {at}.{ref}: missing: reference_specs holds the specs of each reference")


def validate_model_dict(doc: Any, origin: str = "learned model") -> None:
    """ValueError naming the JSON path of the first problem."""
    import jsonschema

    if not isinstance(doc, dict):
        raise ValueError(f"{origin}: $ must be an object, got {type(doc).__name__}")
    if doc.get("schema") != "srift.learned-model/1":
        raise ValueError(f"{origin}: $.schema = {doc.get('schema')!r}: must be 'srift.learned-model/1'")
    check_numbers(doc, origin)
    # the top level by the document's kind first, with the loader's own words (the schema's
    # allOf holds the same fields, and its propertyNames failure would name no key)
    check_document_fields(doc, origin)
    validator = jsonschema.Draft202012Validator(model_schema())
    # an unknown key before another failure at the same path: a misspelled "featurs" is the
    # cause of "features" missing
    errors = sorted(validator.iter_errors(doc),
                    key=lambda e: ([str(p) for p in e.absolute_path], e.validator != "additionalProperties"))
    if errors:
        e = _repeated_item(_unknown_key(_deepest(errors[0])))
        raise ValueError(f"{origin}: {_json_path(tuple(e.absolute_path))}: {_describe(e)}")
    check_reference_specs(doc, origin)
    check_residual_order(doc, origin)


def _deepest(error: Any) -> Any:
    """The error that says why: under a oneOf/anyOf, the branch meant for this value (the one
    whose "type" matched: not refused at the value itself, nor at its "type" key), down to that
    branch's deepest failure."""
    while error.context:
        base = len(error.absolute_path)
        branches: dict[Any, list[Any]] = {}
        for e in error.context:
            branches.setdefault(e.relative_schema_path[0] if e.relative_schema_path else None, []).append(e)

        def wrong_kind(e: Any) -> bool:
            rel = tuple(e.absolute_path)[base:]
            if rel == () and e.validator in ("oneOf", "anyOf") and e.context:
                # a nested choice none of whose branches fits the value's kind ($.model: the
                # single models' oneOf, for a mean model)
                nested: dict[Any, list[Any]] = {}
                for c in e.context:
                    nested.setdefault(c.relative_schema_path[0] if c.relative_schema_path else None, []).append(c)
                return all(any(wrong_kind(c) for c in cs) for cs in nested.values())
            return (rel == () and e.validator == "type") or (rel == ("type",) and e.validator in ("const", "enum"))

        meant = [errs for errs in branches.values() if not any(wrong_kind(e) for e in errs)]
        if not meant:  # no branch fits the value's kind
            kinds = [e.validator_value for e in error.context
                     if tuple(e.absolute_path)[base:] == ("type",) and e.validator == "const"]
            if len(kinds) == len(branches) and isinstance(error.instance, dict):
                return _Explained((*error.absolute_path, "type"), f"{error.instance.get('type')!r} is not one of "
                                  + ", ".join(repr(k) for k in kinds))
            return error
        errs = max(meant, key=lambda es: max(len(e.absolute_path) for e in es))
        error = max(errs, key=lambda e: (len(e.absolute_path), e.validator == "additionalProperties"))
    return error


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        diag, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (ca != cb))
    return row[-1]


def _unknown_key(error: Any) -> Any:
    """An "additionalProperties": false failure (a key the schema does not list for that object)
    as the JSON path of the key, the nearest known key where one is close and the keys the object
    may hold, as the core's reader words it (csrc/json_reader.hpp known_keys); other errors as
    they are."""
    if getattr(error, "validator", None) != "additionalProperties" or not isinstance(error.instance, dict):
        return error
    known = sorted(error.schema.get("properties", {}))
    unknown = [k for k in error.instance if k not in known]
    if not unknown:
        return error
    key = unknown[0]
    nearest = nearest_key(key, known)
    hint = f" (did you mean {nearest!r}?)" if nearest else ""
    return _Explained((*error.absolute_path, key), f"{key!r} is not a known field{hint}; known here: {', '.join(known)}")


def _repeated_item(error: Any) -> Any:
    """A "uniqueItems" failure (a dominance_guard's references, each GPU once) as the JSON path
    of the first item that repeats an earlier one, naming both, as the core words it
    (csrc/learned_document.hpp guard_keys); jsonschema's own message names neither. Other
    errors as they are."""
    if getattr(error, "validator", None) != "uniqueItems" or not isinstance(error.instance, list):
        return error
    seen: list[Any] = []
    for j, item in enumerate(error.instance):
        if item in seen:
            field = error.absolute_path[-1] if error.absolute_path else "items"
            rule = "each reference GPU is listed once" if field == "references" else "each item is listed once"
            return _Explained((*error.absolute_path, j), f"{item!r} is already {field}[{seen.index(item)}]: {rule}")
        seen.append(item)
    return error  # pragma: no cover (jsonschema found a repeat)


def nearest_key(key: str, known: Any) -> str | None:
    """The known key nearest `key` by edit distance, where it is close enough to be a misspelling
    (at most max(2, len(key) // 4) edits, the core's rule), else None."""
    best, nearest = max(2, len(key) // 4) + 1, None
    for k in sorted(known):
        d = _edit_distance(key, k)
        if d < best:
            best, nearest = d, k
    return nearest


class _Explained:
    def __init__(self, path: tuple[Any, ...], text: str):
        self.absolute_path, self.text = path, text


def _describe(error: Any) -> str:
    """The failure with the value, cut short when the value is large."""
    if isinstance(error, _Explained):
        return error.text
    value = repr(error.instance)
    if len(value) > 80:
        value = value[:77] + "..."
    reason = error.message
    rv = repr(error.instance)
    if reason.startswith(rv):
        reason = reason[len(rv):].lstrip()
    elif len(reason) > 200:
        reason = reason[:197] + "..."
    return f"{value} {reason}"


def model_from_dict(doc: dict[str, Any], origin: str = "learned model"):  # -> _core.LearnedModel
    from srift import _core

    validate_model_dict(doc, origin)
    try:
        return _core.LearnedModel.from_json(json.dumps(doc, allow_nan=False))
    except ValueError as exc:
        # the core's message starts "learned model: " (its own origin): once, not twice
        what = str(exc)
        if what.startswith(_CORE_PREFIX):
            what = what[len(_CORE_PREFIX):]
        raise ValueError(f"{origin}: {what}") from None


_CORE_PREFIX = "learned model: "


def read_json(path: str | Path, strict: bool = False) -> Any:
    """The parsed JSON document at `path` (ValueError naming the file when it is not JSON).
    strict: also refuse NaN/Infinity, numbers out of double range and duplicate keys (the core's
    reader keeps a duplicate key's first value, Python's the last), naming their JSON path."""
    p = Path(path)
    try:
        if not strict:
            return json.loads(read_input_text(p))
        doc = json.loads(read_input_text(p), parse_constant=lambda c: _Refused(f"{c} is not a finite number"),
                         parse_float=_strict_float, parse_int=_strict_int, object_pairs_hook=_strict_object)
    except OSError as exc:
        raise ValueError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON: {exc}") from None
    except RecursionError:  # json recurses once per level of [[[[...]]]]
        raise ValueError(f"{p}: arrays or objects nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over sys.get_int_max_str_digits() digits
        raise ValueError(f"{p}: not valid JSON: {exc}") from None
    check_numbers(doc, str(p))
    return doc


def load_model(path: str | Path):  # -> (_core.LearnedModel, dict)
    """(core model, document) from a JSON file; never unpickles anything."""
    doc = read_json(path, strict=True)
    return model_from_dict(doc, str(path)), doc
