"""``memstrata serve`` as a real process: a config file, keys from the CLI, JSON logs with
request ids, and a graceful stop on SIGTERM that leaves pending jobs in the store."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import httpx

from memstrata import Memory

CLI = [sys.executable, "-m", "memstrata.cli.main"]


def test_serve_process_end_to_end(tmp_path):
    db = f"sqlite:///{tmp_path / 'm.db'}"
    config = tmp_path / "memstrata.toml"
    config.write_text(f'[server]\nport = 0\nrate_limit = 0\ndrain_s = 1\n\n[memory]\nstore = "{db}"\n'
                      'embedder = "hash:256"\nworker = "off"\n')
    token = subprocess.run([*CLI, "keys", "create", "--store", db, "--tenant", "acme", "--role", "app"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert token.startswith("msk_")
    listed = json.loads(subprocess.run([*CLI, "keys", "list", "--store", db, "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    assert [k["role"] for k in listed] == ["app"] and "secret_hash" not in listed[0]
    proc = subprocess.Popen([*CLI, "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"at (http://\S+)", line).group(1)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            added = c.post("/v1/users/lin/messages", headers={"X-Request-ID": "req-42"},
                           json={"messages": [{"role": "user", "content": "I live in Lisbon."},
                                              {"role": "assistant", "content": "Nice."}]})
            assert added.status_code == 201 and added.headers["x-request-id"] == "req-42"
            assert c.get("/readyz").json()["status"] == "ok"
            assert "memstrata_http_requests_total" in c.get("/metrics").text
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    logs = [json.loads(x) for x in rest.splitlines() if x.startswith("{")]
    access = [x for x in logs if x["logger"] == "memstrata.access"]
    assert any(x["request_id"] == "req-42" and x["status"] == 201 and x["tenant"] == "acme"
               and x["route"] == "/v1/users/{user_id}/messages" for x in access)
    assert any("pending job(s) handed back" in x["message"] for x in logs)
    assert "memstrata: stopped" in rest
    with Memory(db, embedder="hash:256", worker="off") as memory:  # the job waits for a worker
        assert [j.status for j in memory.jobs("lin", agent_id="acme")] == ["pending"]
        assert [m.content for m in memory.messages("lin", agent_id="acme")] == ["I live in Lisbon.", "Nice."]
    time.sleep(0)


def test_a_connection_that_trickles_its_headers_is_closed_and_others_are_served(tmp_path):
    """Request headers have a deadline (header_timeout_s): a client sending a header line now
    and then ("slowloris") is cut off, a kept-alive client's next request gets the same
    deadline, and a normal request on another connection is answered meanwhile."""
    import socket

    db = f"sqlite:///{tmp_path / 'm.db'}"
    config = tmp_path / "memstrata.toml"
    config.write_text(f'[server]\nport = 0\nrate_limit = 0\ndrain_s = 1\nheader_timeout_s = 1.5\n\n'
                      f'[memory]\nstore = "{db}"\nembedder = "hash:64"\nworker = "off"\n')
    proc = subprocess.Popen([*CLI, "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"at (http://\S+)", proc.stderr.readline()).group(1)
        host, port = url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)), timeout=30)
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 20:
            try:
                slow.sendall(b"X-Slow: 1\r\n")  # a line a second, never the blank line
            except OSError:
                closed = True
                break
            slow.settimeout(1.0)
            try:
                if slow.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            with httpx.Client(base_url=url) as c:  # others are served meanwhile
                assert c.get("/healthz").status_code == 200
        slow.close()
        assert closed, "the trickling connection was never closed"
        # a kept-alive connection: answered, then its next request's headers have the deadline too
        keep = socket.create_connection((host, int(port)), timeout=30)
        keep.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"}"):  # the whole response (a small JSON body)
            answer += keep.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200")
        keep.sendall(b"GET /healthz HTTP/1.1\r\n")
        keep.settimeout(20)
        assert keep.recv(4096) == b""  # closed by the server, no response
        keep.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
