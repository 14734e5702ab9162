"""schemathesis against the live OpenAPI of a running service: every operation, bounded
examples; 0 server errors and 0 schema violations (status codes, content types, headers
and bodies as documented)."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (content_type_conformance, not_a_server_error,  # noqa: E402
                                 response_headers_conformance, response_schema_conformance,
                                 status_code_conformance)
from service_fixture import LiveServer  # noqa: E402

from memstrata import Memory  # noqa: E402

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    memory = Memory(f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'm.db'}", embedder="hash:256")
    with LiveServer(memory) as live:
        token = live.key("acme", "admin")
        with live.client(token) as c:  # something to find, in both languages
            c.post("/v1/users/lin/messages", json={"messages": [
                {"role": "user", "content": "I switched our routing service from Java to Go."},
                {"role": "assistant", "content": "How did it go?"},
                {"role": "user", "content": "提醒我下周三之前续签护照。"}], "session_id": "s1"})
            c.post("/v1/users/lin/items", json={"content": "Prefers short answers",
                                                "kind": "preference"})
        live.token = token
        yield live
    memory.close()


@pytest.fixture(scope="module")
def api(live):
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_live_openapi(case, live):
    case.call_and_validate(base_url=live.url, headers={"Authorization": f"Bearer {live.token}"},
                           checks=CHECKS)
