"""Runs docs/quickstart.md the way a reader does, and reports what happened as JSON.

``python tests/quickstart_run.py OUT.json [--netns]``: every ```bash block is typed,
verbatim and in order, into one bash session (so ``&`` servers keep running and
``cd`` sticks); the ```python block whose first line is ``# NAME.py`` is saved as that
file, as the page asks. The harness only waits between blocks for what the page tells
the reader to wait for (the model's and the service's port), opens the inspector in
Chromium with the key the page printed, and checks through the REST API that forgetting
forgot. ``pip install`` runs verbatim too, as a dry run from the installed packages
(``PIP_DRY_RUN``, ``PIP_NO_INDEX``, no build isolation): it checks the extras resolve, without touching the
environment. With ``--netns`` (the test runs it under ``unshare -rn``) the ports are
the page's own, 8000 and 8080, on a private loopback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quickstart.md"
CHROMIUM = os.environ.get("MEMSTRATA_CHROMIUM", "/usr/bin/chromium")


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of the page, in order: (language, code)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.S | re.M)]


class Shell:
    """One bash session fed line by line, like a terminal."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                                     env=env, text=True, bufsize=1)
        self.n = 0

    def run(self, code: str, timeout: float) -> tuple[int, str]:
        self.n += 1
        marker = f"__quickstart_done_{self.n}__"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(code + f"\necho {marker}$?\n")
        self.proc.stdin.flush()
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith(marker):
                return int(line[len(marker):].strip()), "".join(lines)
            lines.append(line)
        return -1, "".join(lines) + f"\n(no end after {timeout}s)"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.run("kill $(jobs -p) 2>/dev/null; wait", 60)
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            except Exception:
                self.proc.kill()


def wait_http(url: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def inspector_text(token: str) -> dict[str, str]:
    """What Lin sees on her first page of the inspector, in English and in Chinese."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, str] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for locale in ("en-US", "zh-CN"):
            context = browser.new_context(locale=locale)
            page = context.new_page()
            page.goto("http://127.0.0.1:8000/ui/")
            page.fill("#key", token)
            page.keyboard.press("Enter")
            page.wait_for_url("**/ui/users/lin/about", timeout=60_000)
            seen[locale] = page.locator("main").inner_text()
            context.close()
        browser.close()
    return seen


def main() -> None:
    out = Path(sys.argv[1])
    if "--netns" in sys.argv:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    report: dict = {"blocks": []}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "PIP_DRY_RUN": "1", "PIP_NO_INDEX": "1",
           # pip's spelling for *no* build isolation: build with the installed setuptools
           "PIP_NO_BUILD_ISOLATION": "0",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MEMSTRATA_STORE", None)
    env.pop("MEMSTRATA_EMBEDDER", None)
    work = Path(tempfile.mkdtemp(prefix="quickstart-"))
    shell = Shell(ROOT, env)  # the install block runs in the clone; the rest in a fresh folder
    try:
        for lang, code in blocks(PAGE.read_text()):
            entry: dict = {"lang": lang, "code": code}
            report["blocks"].append(entry)
            if lang == "python":
                name = code.splitlines()[0].removeprefix("# ").strip()
                (work / name).write_text(code)
                entry["saved_as"] = name
                continue
            entry["rc"], entry["output"] = shell.run(code, 900)
            if code.startswith("pip install"):
                shell.run(f"cd {work}", 10)
            if "memstrata llm serve" in code:
                entry["ready"] = wait_http("http://127.0.0.1:8080/v1/models", 600)
            if "memstrata serve" in code:
                entry["ready"] = wait_http("http://127.0.0.1:8000/healthz", 300)
                token = re.search(r"^(msk_\S+)$", entry["output"], re.M)
                report["token"] = token.group(1) if token else None
                if token:
                    report["inspector"] = inspector_text(token.group(1))
            if "forget-user" in code and report.get("token"):
                api = httpx.Client(base_url="http://127.0.0.1:8000",
                                   headers={"Authorization": f"Bearer {report['token']}"})
                items, sessions = api.get("/v1/users/lin/items"), api.get("/v1/users/lin/sessions")
                report["after_forget"] = {  # Lin's own key goes with her (revoked: 401)
                    "status": [items.status_code, sessions.status_code],
                    "items": items.json().get("data", []),
                    "sessions": sessions.json().get("data", [])}
    finally:
        shell.close()
    out.write_text(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
