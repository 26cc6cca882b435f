"""Reading the files a user hands srift (profiles, catalogs, overrides, sweep specs, models).

Only regular files are read, and only up to MAX_INPUT_BYTES: a device such as /dev/zero or a
named pipe would otherwise be read until memory runs out, or block forever. Text may start
with a UTF-8 byte-order mark, which some Windows editors write; it is not part of the text.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_INPUT_BYTES = 512 * 2**20  # 512 MiB: a 100k-layer profile or a whole-world catalog is ~100 MiB


def read_input_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at ``path``. OSError (its strerror says why) when it is
    missing, unreadable, not a regular file or larger than MAX_INPUT_BYTES."""
    p = Path(path)
    mode = os.stat(p).st_mode  # FileNotFoundError, PermissionError, ...
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(p))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a device, pipe or socket)", str(p))
    with open(p, "rb") as fh:
        data = fh.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_INPUT_BYTES // 2**20} MiB", str(p))
    return data


UTF8_BOM = b"\xef\xbb\xbf"


def strip_bom(data: bytes) -> bytes:
    """The bytes without a leading UTF-8 byte-order mark."""
    return data.removeprefix(UTF8_BOM)


def decode_text(data: bytes) -> str:
    """UTF-8 text, a leading byte-order mark dropped (UnicodeDecodeError when not UTF-8)."""
    return data.decode("utf-8-sig")


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json.loads' object_pairs_hook that refuses an object with a repeated key (ValueError
    naming it): json.loads keeps the last silently, so a file that says a field twice would
    mean its second value whatever the reader expected."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def read_input_text(path: str | os.PathLike[str]) -> str:
    """read_input_bytes decoded as UTF-8, a leading byte-order mark dropped."""
    return decode_text(read_input_bytes(path))


def check_output_path(path: str | os.PathLike[str], what: str) -> None:
    """ValueError when ``path`` cannot be written: its folder is missing or it is a folder.
    Checked before long work (profiling, a validation run, a probe), not after it."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{what} {str(p)!r} is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{what} {str(p)!r}: folder {str(parent)!r} does not exist")
