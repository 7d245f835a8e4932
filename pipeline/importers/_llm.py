"""simonw/llm's ``logs.db`` (``~/.config/io.datasette.llm/logs.db``, or ``$LLM_USER_PATH``).

The database is read-only to us (opened with ``mode=ro``) and may hold three
generations of llm's tables; every one present is read:

- the message store of current llm: ``threads`` (``id``, ``name``,
  ``tip_message_hash``), ``messages`` chained by ``parent_hash`` with a
  ``role``, their ``parts`` in ``position`` order (``type`` text, reasoning,
  tool_call, tool_result or attachment; ``text``; the rest as JSON in
  ``payload``, long text possibly as ``text_ref`` pieces of ``fragments``), and
  ``turns`` (one model call: ``model``, token counts, ``datetime_utc``, and the
  ``parent_message_hash``..``tip_message_hash`` span it produced);
  an ``attachment`` part names a row of ``attachments`` (``type``, ``path``,
  ``url``): an image becomes an image reference (its address when it had one,
  never its bytes), anything else a placeholder;
- the ``conversations``/``responses`` tables of llm 0.4 to 0.2x (``prompt``,
  ``system``, ``response``, ``model``, ``datetime_utc``, token counts), with
  ``tool_calls`` and ``tool_results`` rows per response where llm had tools,
  and ``prompt_attachments`` naming the attachments of each prompt;
- the first ``logs`` table (``prompt``, ``response``, ``model``, ``chat_id``).

A thread, a conversation, or a response logged on its own is one session.

Example::

    sessions = read_llm(Path("~/.config/io.datasette.llm/logs.db").expanduser(), DamagedLines())
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import orjson

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.importers._content import iso_time, token_count
from ollm_cli.pipeline.importers._reading import SQLITE_MAGIC, DamagedLines, bad_file
from ollm_cli.pipeline.importers._sessions import SessionBuilder
from ollm_cli.pipeline.records import ImagePart, Session

SOURCE: Final = "llm"
_NAME = "llm logs.db"
_ROLES: dict[str, Literal["user", "assistant", "system"]] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
}


def read_llm(path: Path, damaged: DamagedLines) -> list[Session]:
    """Every conversation of an llm log database (a database has no damaged lines to
    skip: ``damaged`` is for the readers' common signature)."""
    try:
        with path.open("rb") as stream:
            magic = stream.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    if magic != SQLITE_MAGIC:
        raise bad_file(path, "line 1", "not an SQLite database", _NAME)
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise bad_file(path, "the header", f"cannot be opened ({exc})", _NAME) from None
    db.row_factory = sqlite3.Row
    try:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        if not tables & {"threads", "responses", "logs"}:
            raise bad_file(
                path, "the schema", "no threads, responses or logs table: not llm's", _NAME
            )
        sessions: list[Session] = []
        if {"threads", "turns", "messages", "parts"} <= tables:
            sessions += _threads(db, path, tables)
        if "responses" in tables:
            sessions += _responses(db, path, tables)
        if "logs" in tables:
            sessions += _logs(db, path)
    except sqlite3.DatabaseError as exc:
        raise bad_file(path, "a table", f"cannot be read ({exc})", _NAME) from None
    finally:
        db.close()
    return sessions


# -- the message store -------------------------------------------------------------------------


Attachment = ImagePart | str
"""An attachment as imported: an image reference, or what it was (for a placeholder)."""


def _attachments(db: sqlite3.Connection, tables: set[str]) -> dict[str, Attachment]:
    """Each attachment by id, its bytes left in the database."""
    if "attachments" not in tables:
        return {}
    found: dict[str, Attachment] = {}
    for row in db.execute("select id, type, url from attachments"):
        kind = row["type"] if isinstance(row["type"], str) else ""
        if kind.startswith("image/"):
            found[row["id"]] = ImagePart(url=row["url"] or None, mime_type=kind)
        else:
            found[row["id"]] = f"an llm attachment ({kind})" if kind else "an llm attachment"
    return found


def _attach(builder: SessionBuilder, role: str, attachment: Attachment | None, at: str) -> None:
    as_role = _ROLES.get(role, "user")
    if isinstance(attachment, ImagePart):
        builder.image(as_role, attachment, at)
    else:
        builder.placeholder(as_role, attachment or "an llm attachment missing from its table", at)


def _threads(db: sqlite3.Connection, path: Path, tables: set[str]) -> list[Session]:
    parents = {
        r["hash"]: (r["parent_hash"], r["role"]) for r in db.execute("select * from messages")
    }
    parts: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute("select * from parts order by message_hash, position"):
        parts[row["message_hash"]].append(row)
    fragments: dict[int, str] = {}
    if "fragments" in tables:
        fragments = {r["id"]: r["content"] for r in db.execute("select id, content from fragments")}
    referenced = _Referenced(fragments, _attachments(db, tables))
    turns: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute("select * from turns order by datetime_utc, rowid"):
        turns[row["thread_id"]].append(row)
    sessions = []
    for thread in db.execute("select * from threads order by datetime_utc, rowid"):
        chain: list[str] = []
        cursor = thread["tip_message_hash"]
        while cursor is not None and cursor in parents and len(chain) <= len(parents):
            chain.append(cursor)
            cursor = parents[cursor][0]
        chain.reverse()
        builder = SessionBuilder(source=SOURCE, source_id=f"thread:{thread['id']}", path=path)
        builder.title = thread["name"] or None
        times = _message_times(chain, turns[thread["id"]], iso_time(thread["datetime_utc"]))
        for turn in turns[thread["id"]]:
            builder.model = turn["model"] or builder.model
            builder.prompt_tokens += token_count(turn["input_tokens"])
            builder.completion_tokens += token_count(turn["output_tokens"])
        for position, message_hash in enumerate(chain):
            role = parents[message_hash][1]
            builder.next_message()
            for part in parts[message_hash]:
                _store_part(builder, role, part, times[position], referenced, path)
        session = builder.build()
        if session is not None:
            sessions.append(session)
    return sessions


def _message_times(chain: list[str], turns: list[sqlite3.Row], fallback: str) -> list[str]:
    """Each message's time: that of the first turn (in time order) that produced it or
    read it (a turn reads the chain up to its output's end)."""
    index = {h: i for i, h in enumerate(chain)}
    times: list[str | None] = [None] * len(chain)
    for turn in turns:
        at = iso_time(turn["datetime_utc"], fallback)
        for position in range(index.get(turn["tip_message_hash"], -1) + 1):
            times[position] = times[position] or at
    return [t or fallback for t in times]


@dataclass
class _Referenced:
    """What parts refer to by id: long texts (fragments) and attachments."""

    fragments: dict[int, str]
    attachments: dict[str, Attachment]


def _store_part(
    builder: SessionBuilder,
    role: str,
    part: sqlite3.Row,
    at: str,
    referenced: _Referenced,
    path: Path,
) -> None:
    try:
        payload = orjson.loads(part["payload"]) if part["payload"] else {}
    except orjson.JSONDecodeError:
        raise bad_file(path, f"parts row {part['id']}", "its payload is not JSON", _NAME) from None
    text = part["text"]
    if text is None and isinstance(payload.get("text_ref"), list):
        text = "".join(
            piece.get("literal") or referenced.fragments.get(piece.get("fragment", -1), "")
            for piece in payload["text_ref"]
            if isinstance(piece, dict)
        )
    if text is None:
        text = payload.get("text") if isinstance(payload.get("text"), str) else ""
    kind = part["type"]
    if kind == "text":
        builder.say(_ROLES.get(role, "user"), text, at)
    elif kind == "reasoning":
        builder.think(text, at)
    elif kind == "tool_call":
        builder.call(
            payload.get("tool_call_id"),
            str(payload.get("name") or part["tool_name"] or ""),
            payload.get("arguments"),
            at,
        )
    elif kind == "tool_result":
        failed = bool(payload.get("exception"))
        builder.result(
            payload.get("tool_call_id"),
            payload.get("exception") if failed else payload.get("output"),
            at,
            name=payload.get("name") or part["tool_name"],
            is_error=failed,
        )
    elif kind == "attachment":
        attachment = payload.get("attachment")
        ident = attachment.get("id") if isinstance(attachment, dict) else None
        _attach(builder, role, referenced.attachments.get(str(ident)), at)
    else:
        builder.placeholder(_ROLES.get(role, "user"), f"an llm {kind} part", at)


# -- the responses tables ----------------------------------------------------------------------


def _responses(db: sqlite3.Connection, path: Path, tables: set[str]) -> list[Session]:
    columns = {r[1] for r in db.execute("pragma table_info(responses)")}
    calls: dict[str, list[sqlite3.Row]] = defaultdict(list)
    results: dict[str, list[sqlite3.Row]] = defaultdict(list)
    if "tool_calls" in tables:
        for row in db.execute("select * from tool_calls order by id"):
            calls[row["response_id"]].append(row)
    if "tool_results" in tables:
        for row in db.execute("select * from tool_results order by id"):
            results[row["response_id"]].append(row)
    attachments = _attachments(db, tables)
    attached: dict[str, list[str]] = defaultdict(list)
    if "prompt_attachments" in tables:
        for row in db.execute('select * from prompt_attachments order by "order"'):
            attached[row["response_id"]].append(row["attachment_id"])
    names: dict[str, str] = {}
    if "conversations" in tables:
        names = {r["id"]: r["name"] for r in db.execute("select id, name from conversations")}
    order = "datetime_utc, rowid" if "datetime_utc" in columns else "rowid"
    grouped: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute(f"select * from responses order by {order}"):
        key = row["conversation_id"] if "conversation_id" in columns else None
        grouped[f"conversation:{key}" if key else f"response:{row['id']}"].append(row)
    sessions = []
    for source_id, rows in grouped.items():
        builder = SessionBuilder(source=SOURCE, source_id=source_id, path=path)
        key = source_id.partition(":")[2]
        builder.title = names.get(key) or None
        for row in rows:
            at = iso_time(row["datetime_utc"] if "datetime_utc" in columns else None)
            builder.model = row["model"] or builder.model
            for result in results.get(row["id"], []):
                keys = result.keys()
                failed = "exception" in keys and bool(result["exception"])
                builder.result(
                    result["tool_call_id"],
                    result["exception"] if failed else result["output"],
                    at,
                    name=result["name"],
                    is_error=failed,
                )
            if row["system"] and not builder.messages:
                builder.say("system", row["system"], at)
            builder.next_message()
            builder.say("user", row["prompt"] or "", at)
            for ident in attached.get(row["id"], []):
                _attach(builder, "user", attachments.get(ident), at)
            if "reasoning" in columns and row["reasoning"]:
                builder.think(row["reasoning"], at)
            builder.say("assistant", row["response"] or "", at)
            for call in calls.get(row["id"], []):
                builder.call(call["tool_call_id"], call["name"], call["arguments"], at)
            if "input_tokens" in columns:
                builder.prompt_tokens += token_count(row["input_tokens"])
                builder.completion_tokens += token_count(row["output_tokens"])
        session = builder.build()
        if session is not None:
            sessions.append(session)
    return sessions


def _logs(db: sqlite3.Connection, path: Path) -> list[Session]:
    columns = {r[1] for r in db.execute("pragma table_info(logs)")}
    time_column = next(
        (c for c in ("datetime_utc", "timestamp_utc", "timestamp") if c in columns), None
    )
    grouped: dict[str, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute("select * from logs order by rowid"):
        chat = row["chat_id"] if "chat_id" in columns else None
        grouped[f"log:{chat or row['id']}"].append(row)
    sessions = []
    for source_id, rows in grouped.items():
        builder = SessionBuilder(source=SOURCE, source_id=source_id, path=path)
        for row in rows:
            at = iso_time(row[time_column] if time_column else None)
            builder.model = row["model"] or builder.model
            builder.next_message()
            builder.say("user", row["prompt"] or "", at)
            builder.say("assistant", row["response"] or "", at)
        session = builder.build()
        if session is not None:
            sessions.append(session)
    return sessions
