"""Kernel names: what PTX, the cubin's symbol table and file names accept, and how to get there.

A kernel name becomes a PTX `.entry` symbol, a cubin symbol and the stem of dumped files. LLVM
aborts the whole process on a symbol with non-ASCII letters ("Symbol name with unsupported
characters"), and a lone "_" is a PTX syntax error. So names are ASCII identifiers of at most
`MAX_KERNEL_NAME` characters: a name derived from a Python function (`def añadir`) is
transliterated ("anadir"); a name the user spells out (`name="kérnel²"`) is checked and
rejected with a suggestion, since silently renaming it would break lookups by that name.
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import KernelNameError

MAX_KERNEL_NAME = 200  # file names of dumps (`<name>.cubin`) must stay under 255 bytes
_VALID = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*|_[A-Za-z0-9_]+)\Z")


def is_valid_kernel_name(name: object) -> bool:
    """True for an ASCII identifier PTX accepts as a symbol (not a lone '_'), short enough for files."""
    return isinstance(name, str) and len(name) <= MAX_KERNEL_NAME and _VALID.match(name) is not None


def kernel_name_from(text: str) -> str:
    """A valid kernel name as close to `text` as ASCII allows: 'añadir' -> 'anadir', 'kérnel²' -> 'kernel2'."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9_]", "_", ascii_text)[:MAX_KERNEL_NAME]
    if not name.strip("_"):
        return "kernel"
    if not name[0].isalpha() and not (name[0] == "_" and len(name) > 1):
        name = ("k_" + name)[:MAX_KERNEL_NAME]
    return name


def check_kernel_name(name: object, what: str = "name") -> str:
    """Return `name` if it is valid, else raise KernelNameError naming `what` with a suggestion."""
    if is_valid_kernel_name(name):
        return name  # type: ignore[return-value]
    if not isinstance(name, str):
        raise KernelNameError(f"{what}: expected a str, got {type(name).__name__}")
    hint = f"; e.g. {kernel_name_from(name)!r}" if name else ""
    raise KernelNameError(
        f"{what}: expected an ASCII identifier of at most {MAX_KERNEL_NAME} characters "
        f"(letters A-Z/a-z, digits, '_'; PTX symbols allow nothing else), got {name!r}{hint}")
