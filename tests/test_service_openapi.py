"""schemathesis against the live OpenAPI of a running service: every operation, bounded
examples; 0 server errors and 0 schema violations (status codes, content types, headers
and bodies as documented).

Driven through schemathesis' Python API (``APIOperation.as_strategy`` under hypothesis)
rather than its pytest plugin: the plugin reaches into pytest's private item attributes
and broke with pytest 9.2 (``'Function' object has no attribute '_nodeid'``). One test per
operation, named by its label, so a failure says which route broke.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import (content_type_conformance, not_a_server_error,  # noqa: E402
                                 response_headers_conformance, response_schema_conformance,
                                 status_code_conformance)
from schemathesis.generation.modes import GenerationMode  # noqa: E402
from service_fixture import LiveServer  # noqa: E402

from memstrata import Memory  # noqa: E402

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


def _operation_labels() -> list[str]:
    """Every operation of the service's OpenAPI document, read at collection time from an
    app over a throwaway store (the live test below reads the served document)."""
    pytest.importorskip("fastapi")
    from memstrata.server import create_app

    with tempfile.TemporaryDirectory() as tmp, \
            Memory(f"sqlite:///{Path(tmp) / 'm.db'}", embedder="hash:256") as memory:
        document = create_app(memory).openapi()
    schema = schemathesis.openapi.from_dict(document)
    return [result.ok().label for result in schema.get_all_operations()]


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
    # generous timeouts: a loaded CI machine can take seconds to build the document
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json", timeout=120)


def test_every_operation_is_tested(api):
    """The served document has exactly the operations collected below."""
    served = sorted(result.ok().label for result in api.get_all_operations())
    assert served == sorted(_LABELS)


_LABELS = _operation_labels()


@pytest.mark.parametrize("label", _LABELS)
def test_live_openapi(label, api, live):
    operation = api.find_operation_by_label(label)
    assert operation is not None, label
    headers = {"Authorization": f"Bearer {live.token}"}

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def conforms(case):
        case.call_and_validate(base_url=live.url, headers=headers, checks=CHECKS, timeout=120)

    conforms()
