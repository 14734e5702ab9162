"""What a new user gets wrong first, and what the service says back: a body that is not
JSON (or not sent as JSON), a port already taken, an upstream that is not a URL; and
secrets kept out of the serving lines."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from memstrata import ConfigError, Memory
from memstrata.cli.main import cli
from memstrata.server import ServerSettings, create_app
from memstrata.stores import safe_url


@pytest.fixture(scope="module")
def app_and_key():
    with Memory("memory://", embedder="hash:256", worker="off") as memory:
        app = create_app(memory, ServerSettings(rate_limit=0))
        yield app, app.state.service.keys.create("acme", "app").token


@pytest.mark.parametrize(("body", "content_type", "says"), [
    (b'{"query": "tea",}', "application/json",
     "the body is not valid JSON: Expecting property name enclosed in double quotes (at character 16)"),
    (b"query=tea", "application/x-www-form-urlencoded",
     "the body must be a JSON object sent with Content-Type: application/json "
     "(got application/x-www-form-urlencoded)"),
    (b"", "application/json", "the body is empty: send a JSON object with Content-Type: application/json"),
    (b'["tea"]', "application/json", "the body must be a JSON object, not another JSON value"),
    (b'{"query": 5}', "application/json", "query: Input should be a valid string"),
])
def test_a_body_that_is_not_a_json_object_says_so(app_and_key, body, content_type, says):
    app, token = app_and_key
    response = TestClient(app).post("/v1/users/lin/search", content=body,
                                    headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    assert response.status_code == 422
    assert response.json()["error"] == {"type": "ValidationError", "message": says, "status": 422,
                                        "request_id": response.headers["x-request-id"]}


def test_an_upstream_that_is_not_a_url_is_refused_at_start():
    with pytest.raises(ConfigError, match="upstream must be an OpenAI-compatible base URL"):
        ServerSettings(upstream="127.0.0.1:8080")
    assert ServerSettings(upstream="https://api.example.com/v1").upstream == "https://api.example.com/v1"


def test_serve_on_a_taken_port_says_which_and_what_to_do():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--store", "memory://", "--embedder", "hash:256",
                                          "--port", str(port)])
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.output
    assert "--port (0: any free one)" in result.output


def test_worker_says_what_it_runs():
    result = CliRunner().invoke(cli, ["worker", "--store", "memory://", "--embedder", "hash:256",
                                      "--until-idle"])
    assert result.exit_code == 0, result.output
    assert "running the jobs of memory:// until none is left" in result.output
    assert "0 job(s) run" in result.output


def test_passwords_stay_out_of_logged_urls():
    assert safe_url("postgresql://app:s3cr:et@db:5432/m?sslmode=require") == \
        "postgresql://app:***@db:5432/m?sslmode=require"
    for url in ("postgresql://app@db/m", "sqlite:///memstrata.db", "memory://", "redis://:pw@r:6379/0"):
        assert "s3cr" not in safe_url(url) and "pw" not in safe_url(url)
    assert safe_url("postgresql://app@db/m") == "postgresql://app@db/m"


def test_every_error_response_is_documented_as_json():
    """An operation whose success is not JSON (the export's JSON Lines) still documents
    its errors as the JSON error body they are."""
    with Memory("memory://", embedder="hash:256", worker="off") as memory:
        spec = create_app(memory, ServerSettings(upstream="http://127.0.0.1:9/v1")).openapi()
    seen = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if int(code) >= 400 and "content" in response:
                    assert set(response["content"]) == {"application/json"}, (method, path, code)
                    seen += 1
    export = spec["paths"]["/v1/users/{user_id}/export"]["get"]["responses"]["200"]["content"]
    assert set(export) == {"application/x-ndjson"} and seen > 100


def test_the_client_refuses_what_cannot_work_before_any_request():
    from memstrata import Client, ValidationError

    with pytest.raises(ConfigError, match="http:// or https://"):
        Client("127.0.0.1:8000", "msk_x")
    for key in ("", " ", "msk_a b"):
        with pytest.raises(ConfigError, match="memstrata keys create"):
            Client("http://127.0.0.1:8000", key)
    with Client("http://127.0.0.1:9", "msk_x") as client, \
            pytest.raises(ValidationError, match="user_id must be a non-empty string"):
        client.user("")


def test_an_audit_page_mark_beyond_64_bits_is_a_422_not_a_500():
    """``before`` is a row seq: a 37-digit number overflowed the database's integer."""
    with Memory("memory://", embedder="hash:256", worker="off") as memory:
        app = create_app(memory, ServerSettings(rate_limit=0))
        token = app.state.service.keys.create("acme", "admin").token
        client = TestClient(app, raise_server_exceptions=False)
        got = client.get("/v1/audit", params={"before": "1" + "0" * 36},
                         headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 422 and "before" in got.json()["error"]["message"]
        assert client.get("/v1/audit", params={"before": str(2**63 - 1)},
                          headers={"Authorization": f"Bearer {token}"}).status_code == 200
