"""Load learned-model documents: JSON Schema validation, then the core's own checks."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from srift.files import read_input_text

__all__ = ["validate_model_dict", "load_model", "model_from_dict", "model_schema", "read_json"]


@lru_cache(maxsize=1)
def model_schema() -> dict[str, Any]:
    return json.loads(resources.files("srift").joinpath("schemas/learned_model.schema.json").read_text())


def validate_model_dict(doc: Any, origin: str = "learned model") -> None:
    """ValueError naming the JSON path of the first problem."""
    import jsonschema

    if not isinstance(doc, dict):
        raise ValueError(f"{origin}: $ must be an object, got {type(doc).__name__}")
    if doc.get("schema") != "srift.learned-model/1":
        raise ValueError(f"{origin}: $.schema = {doc.get('schema')!r}: must be 'srift.learned-model/1'")
    validator = jsonschema.Draft202012Validator(model_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        raise ValueError(f"{origin}: {path}: {e.message[:300]}")


def model_from_dict(doc: dict[str, Any], origin: str = "learned model"):  # -> _core.LearnedModel
    from srift import _core

    validate_model_dict(doc, origin)
    try:
        return _core.LearnedModel.from_json(json.dumps(doc, allow_nan=False))
    except ValueError as exc:
        raise ValueError(f"{origin}: {exc}") from None


def read_json(path: str | Path) -> Any:
    """The parsed JSON document at `path` (ValueError naming the file when it is not JSON)."""
    p = Path(path)
    try:
        return json.loads(read_input_text(p))
    except OSError as exc:
        raise ValueError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON: {exc}") from None
    except RecursionError:  # json recurses once per level of [[[[...]]]]
        raise ValueError(f"{p}: arrays or objects nested too deeply") from None


def load_model(path: str | Path):  # -> (_core.LearnedModel, dict)
    """(core model, document) from a JSON file; never unpickles anything."""
    doc = read_json(path)
    return model_from_dict(doc, str(path)), doc
