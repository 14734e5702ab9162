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

__all__ = ["handle_errors"]


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
            logging.getLogger("memstrata").debug("unexpected error", exc_info=True)
            _fail(f"unexpected {type(exc).__name__}: {exc} — a memstrata bug, please report "
                  "it (-vv shows the traceback)")

    return wrapper
