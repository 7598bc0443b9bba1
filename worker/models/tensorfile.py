"""The safetensors file format, read and written with numpy alone.

Invariants: a file is an 8-byte little-endian header length ``n``, ``n`` bytes of JSON mapping
each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to
the end of the header; an optional ``"__metadata__"`` entry of strings), then the raw
little-endian, C-ordered tensor bytes. Offsets must tile the data exactly, with no gap, overlap
or trailing byte — the same checks the reference library makes. Writing is deterministic: names
sorted, compact JSON, header padded with spaces to a multiple of 8 so the data is aligned.

Why not the ``safetensors`` package: it is only in the ``model`` extra (the build tools), and
the worker must load static models at run time with its own dependencies; the format is small
enough to read here. Tests check both directions against the reference library.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

_DTYPES: dict[str, np.dtype[np.generic]] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}
# A header larger than this is not a model we wrote or could sensibly load (the reference
# library refuses such headers too).
_MAX_HEADER_BYTES = 100_000_000


class TensorFileError(ValueError):
    """The file is not a valid safetensors file (or holds a dtype numpy cannot represent)."""


def tensor_shapes(path: Path) -> dict[str, list[int]]:
    """Each tensor's shape, from the header alone (the data is not read)."""
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise TensorFileError(f"{path}: too short for a safetensors header")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > _MAX_HEADER_BYTES:
            raise TensorFileError(f"{path}: header length {header_len} exceeds the limit")
        raw = fh.read(header_len)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TensorFileError(f"{path}: header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise TensorFileError(f"{path}: header is not a JSON object")
    shapes: dict[str, list[int]] = {}
    for name, info in header.items():
        if name != "__metadata__" and isinstance(info, dict):
            shape = info.get("shape")
            if isinstance(shape, list) and all(isinstance(n, int) for n in shape):
                shapes[name] = shape
    return shapes


def read_tensors(path: Path) -> dict[str, NDArray[np.generic]]:
    """Every tensor in ``path``, as numpy arrays in native byte order."""
    data = path.read_bytes()
    if len(data) < 8:
        raise TensorFileError(f"{path}: too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > min(_MAX_HEADER_BYTES, len(data) - 8):
        raise TensorFileError(f"{path}: header length {header_len} exceeds the file")
    try:
        header = json.loads(data[8 : 8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TensorFileError(f"{path}: header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise TensorFileError(f"{path}: header is not a JSON object")
    body = memoryview(data)[8 + header_len :]
    tensors: dict[str, NDArray[np.generic]] = {}
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype_name, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError) as exc:
            raise TensorFileError(f"{path}: tensor {name!r} has a malformed entry") from exc
        dtype = _DTYPES.get(dtype_name)
        if dtype is None:
            raise TensorFileError(f"{path}: tensor {name!r} has unsupported dtype {dtype_name!r}")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= len(body)) or end - begin != count * dtype.itemsize:
            raise TensorFileError(f"{path}: tensor {name!r} offsets do not match its shape")
        spans.append((begin, end, name))
        array = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = array.astype(dtype.newbyteorder("="), copy=True)
    cursor = 0
    for begin, end, name in sorted(spans):
        if begin != cursor:
            raise TensorFileError(f"{path}: tensor {name!r} leaves a gap or overlaps another")
        cursor = end
    if cursor != len(body):
        raise TensorFileError(f"{path}: {len(body) - cursor} bytes after the last tensor")
    return tensors


def write_tensors(path: Path, tensors: Mapping[str, NDArray[np.generic]]) -> None:
    """Write ``tensors`` (names sorted, data in that order) to ``path``."""
    header: dict[str, object] = {}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        dtype_name = _NAMES.get(array.dtype.newbyteorder("<"), _NAMES.get(array.dtype))
        if dtype_name is None:
            raise TensorFileError(f"tensor {name!r}: dtype {array.dtype} cannot be written")
        blob = np.ascontiguousarray(array, dtype=_DTYPES[dtype_name]).tobytes()
        header[name] = {
            "dtype": dtype_name,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(encoded)))
        fh.write(encoded)
        for blob in blobs:
            fh.write(blob)
