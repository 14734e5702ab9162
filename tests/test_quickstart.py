"""docs/quickstart.md runs as written: install (a dry run), the local model, the agent
loop, the inspector in Chromium showing what was learned, forgetting it — every block
verbatim, in order (``tests/quickstart_run.py``). And the README's first screen says what
memstrata is, gives the two commands and links the quickstart first."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("MEMSTRATA_CHROMIUM", "/usr/bin/chromium")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _private_network() -> bool:
    """Whether ``unshare -rn`` gives this process a loopback of its own (containers may
    forbid it)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"],
                          capture_output=True).returncode == 0


def _skip(why: str) -> None:
    if os.environ.get("CI"):
        raise RuntimeError(why)
    pytest.skip(why)


def test_the_quickstart_runs_as_written(tmp_path):
    pytest.importorskip("llama_cpp", reason="the local-llm extra is not installed")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        _skip(f"no Chromium at {CHROMIUM}")
    out = tmp_path / "report.json"
    command = [sys.executable, str(ROOT / "tests" / "quickstart_run.py"), str(out)]
    if _private_network():  # the page's own ports, whatever else runs on this machine
        command = ["unshare", "-rn", *command, "--netns"]
    elif not (_free(8000) and _free(8080)):
        _skip("ports 8000 and 8080 are taken and unshare -rn is not allowed here")
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    blocks = report["blocks"]
    assert [b["lang"] for b in blocks] == ["bash", "bash", "python", "bash", "bash", "bash"]
    for block in blocks:
        if block["lang"] == "bash":
            assert block["rc"] == 0, block
    install, model, agent, run, inspect, forget = blocks
    assert "Would install memstrata" in install["output"]
    assert model["ready"] and inspect["ready"]
    assert agent["saved_as"] == "agent.py"
    # the loop talked to the model three times and learned from what Lin said
    assert run["output"].count("agent: ") == 3
    learned = run["output"].split("remembered about Lin:")[1]
    assert "Lisbon" in learned and "peanuts" in learned
    # Lin's first page in the inspector says it, in both languages
    assert report["token"].startswith("msk_")
    english, chinese = report["inspector"]["en-US"], report["inspector"]["zh-CN"]
    assert "You live in Lisbon" in english and "You are allergic to peanuts" in english
    assert "我记得的关于你的事" in chinese and "You live in Lisbon" in chinese
    # forgotten: nothing left of Lin
    # and her end-user key was revoked with her
    assert report["after_forget"] == {"status": [401, 401], "items": [], "sessions": []}
    assert "forgot" in forget["output"]


def test_the_readme_first_screen():
    readme = (ROOT / "README.md").read_text()
    first = "\n".join(readme.splitlines()[:40])  # a screen
    assert first.startswith("# memstrata\n")
    links = re.findall(r"\]\(([^)]+)\)", readme)
    assert links and links[0] == "docs/quickstart.md"  # the first link of the page
    assert "docs/quickstart.md" in first
    assert "long-term memory for LLM agents" in first
    commands = re.findall(r"```bash\n(.*?)```", first, re.S)
    assert [c.strip() for c in commands][:2] == ["pip install -e . && memstrata demo", "./scripts/test"]
