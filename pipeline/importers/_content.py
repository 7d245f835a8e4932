"""The pieces of other tools' records, as OLLM keeps them: times, token counts,
tool results and arguments, images (references, never bytes) and the placeholder
text that stands for a part not imported.

Example::

    iso_time(1756720803000)            # '2025-09-01T10:00:03.000000Z'
    placeholder_text("a Codex item")   # '[a Codex item: not imported]'
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from ollm_cli.pipeline.importers._reading import too_deep
from ollm_cli.pipeline.records import ImagePart, now_iso, parse_iso


def iso_time(value: Any, fallback: str | None = None) -> str:
    """``value`` (ISO text, or seconds or milliseconds since 1970) as an ISO timestamp."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 10**11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        except (ValueError, OverflowError, OSError):  # out of the calendar's range
            return fallback or now_iso()
    if isinstance(value, str) and value:
        try:
            parse_iso(value.replace(" ", "T", 1) if "T" not in value else value)
        except ValueError:
            pass
        else:
            return value.replace(" ", "T", 1) if "T" not in value else value
    return fallback or now_iso()


def text_of(value: Any) -> str:
    """Readable text of a tool result or message content (strings, lists of blocks, JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = [text_of(item) for item in value]
        return "\n".join(piece for piece in pieces if piece)
    if isinstance(value, dict):
        image = image_of(value)
        if image is not None:
            return placeholder_text(f"image{f' ({image.mime_type})' if image.mime_type else ''}")
        for key in ("text", "output", "content"):
            if isinstance(value.get(key), str | list):
                return text_of(value[key])
    return orjson.dumps(value).decode()


def token_count(value: Any) -> int:
    """A token count as a tool wrote it (a number, or digits); 0 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return max(int(value), 0)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def placeholder_text(what: str) -> str:
    """The text that stands for a part not imported (``what``: what it was)."""
    return f"[{what}: not imported]"


_IMAGE_TYPES = {"image", "input_image", "image_url"}


def _mime_of_data_url(url: str) -> str | None:
    head = url[5:].split(",", 1)[0].split(";", 1)[0]
    return head or None


def image_of(block: dict[str, Any]) -> ImagePart | None:
    """The image reference of a content block of any tool (Anthropic ``image``,
    OpenAI ``input_image``, Gemini ``inlineData``/``fileData``), ``None`` if not an
    image. Only a web address is kept; embedded bytes are not."""
    url: Any = None
    mime: Any = None
    if isinstance(block.get("type"), str) and block["type"] in _IMAGE_TYPES:
        source = block.get("source")
        if isinstance(source, dict):  # Anthropic: base64 or url
            mime, url = source.get("media_type"), source.get("url")
        else:
            url = block.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
    elif isinstance(block.get("inlineData"), dict):
        mime = block["inlineData"].get("mimeType")
        if not (isinstance(mime, str) and mime.startswith("image/")):
            return None
    elif isinstance(block.get("fileData"), dict):
        mime, url = block["fileData"].get("mimeType"), block["fileData"].get("fileUri")
        if not (isinstance(mime, str) and mime.startswith("image/")):
            return None
    else:
        return None
    if isinstance(url, str) and url.startswith("data:"):
        mime, url = mime or _mime_of_data_url(url), None
    return ImagePart(
        url=url if isinstance(url, str) and url else None,
        mime_type=mime if isinstance(mime, str) and mime else None,
    )


def arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a mapping (JSON text is parsed, unless nested too deep to
    store; anything else is wrapped)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            return {"input": value}
        if too_deep(parsed):  # kept as the text it came as, which OLLM can store
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}
