"""Reading conversations to import from JSON or JSON Lines files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ValidationError

__all__ = ["read_sessions"]


def read_sessions(path: Path) -> list[dict[str, Any]]:
    """Sessions from a file holding one of:

    * a JSON list of sessions ``[{"session_id": "s1", "messages": [...]}, ...]``
    * a JSON object ``{"sessions": [...]}``
    * a JSON list of messages (one session named after the file)
    * JSON Lines, one message per line, each with a ``session_id``
    """
    text = path.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{path}:{number} is neither JSON nor JSON Lines: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("sessions"), list):
        data = data["sessions"]
    if not isinstance(data, list) or not data:
        raise ValidationError(f"{path} holds no sessions or messages")
    if all(isinstance(x, dict) and "messages" in x for x in data):
        return data
    if all(isinstance(x, dict) and "role" in x for x in data):
        sessions: dict[str, list[dict[str, Any]]] = {}
        for message in data:
            sid = str(message.get("session_id") or path.stem)
            sessions.setdefault(sid, []).append({k: v for k, v in message.items() if k != "session_id"})
        return [{"session_id": sid, "messages": msgs} for sid, msgs in sessions.items()]
    raise ValidationError(f"{path}: expected sessions with 'messages' or messages with 'role'")
