"""Where the browser tests find Chromium, and what they do when it is missing.

``CHROMIUM = chromium_or_skip()`` at the top of a test module: the path of Debian's
``chromium`` (or ``$MEMSTRATA_CHROMIUM``); without it the module skips, saying why, except on
CI (``CI=true``), where a missing browser fails instead — ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["chromium_or_skip"]


def chromium_or_skip() -> str:
    chromium = os.environ.get("MEMSTRATA_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        why = f"no Chromium at {chromium} (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI"):
            raise RuntimeError(why)
        pytest.skip(why, allow_module_level=True)
    return chromium
