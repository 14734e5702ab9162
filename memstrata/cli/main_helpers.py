"""Helpers shared by the CLI modules."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ..errors import MemstrataError

__all__ = ["handle_errors"]


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn memstrata errors into one line on stderr and exit status 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MemstrataError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except (OSError, json.JSONDecodeError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)

    return wrapper
