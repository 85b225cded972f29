"""Read an .npz file without trusting it: sizes are checked before anything is inflated.

`numpy.load` inflates a member as far as its zip entry says and allocates an array as large
as its .npy header says, so a 21 MB file can ask for gigabytes. Here the zip's central
directory (`ZipInfo.file_size`, which also caps what zipfile will inflate) and every .npy
header (shape times item size must be the member's size) are checked first, against a
limit on the whole file's inflated size.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

ZIP_MAGIC = b"PK\x03\x04"
DEFAULT_MAX_BYTES = 4 << 30  # ~100 million events: past it, say so rather than swap


def zip_magic_problem(path: str | Path) -> str | None:
    """Why the file at `path` is not a zip archive (an .npz is one), or None: read before numpy is."""
    with open(path, "rb") as f:
        head = f.read(len(ZIP_MAGIC))
    if head == ZIP_MAGIC:
        return None
    return f"expected an .npz file (a zip archive, starting with {ZIP_MAGIC!r}), got a file starting with {head!r}"


def read_npz(path: str | Path, names: tuple[str, ...], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, np.ndarray]:
    """The arrays `names` of the .npz at `path` (no pickles), each checked before it is read.

    Raises ValueError naming the member when one is missing, inflates past `max_bytes`
    (all members together), or declares a shape its bytes do not hold."""
    what = str(path)
    problem = zip_magic_problem(path)
    if problem:
        raise ValueError(f"{what}: {problem}")
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: info for info in archive.infolist()}
        wanted = [f"{name}.npy" for name in names]
        missing = [m for m in wanted if m not in members]
        if missing:
            raise ValueError(f"{what}: expected the members {', '.join(wanted)}, missing {', '.join(missing)}")
        total = sum(members[m].file_size for m in wanted)
        if total > max_bytes:
            largest = max(wanted, key=lambda m: members[m].file_size)
            raise ValueError(f"{what}: expected at most {max_bytes} bytes once inflated, got {total} "
                             f"({largest} alone {members[largest].file_size}); pass max_bytes= to read a larger "
                             f"file you trust")
        return {name: _read_member(archive, members[member], what) for name, member in zip(names, wanted)}


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> np.ndarray:
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        read_header = _HEADER_READERS.get(version)
        if read_header is None:
            raise ValueError(f"{what}: {info.filename}: expected an .npy of format 1.0 or 2.0, got {version}")
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise ValueError(f"{what}: {info.filename}: expected numbers, got the object dtype {dtype}")
        declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if declared != info.file_size - f.tell():
            raise ValueError(f"{what}: {info.filename}: its header declares {shape} {dtype} ({declared} bytes), "
                             f"its zip entry holds {info.file_size - f.tell()} bytes")
        data = bytearray(declared)  # writable, unlike bytes: the arrays stay ordinary ones
        if f.readinto(data) != declared:
            raise ValueError(f"{what}: {info.filename}: expected {declared} bytes of data, the member is shorter")
    array = np.frombuffer(data, dtype=dtype) if declared else np.zeros(0, dtype)
    return array.reshape(shape, order="F" if fortran else "C")
