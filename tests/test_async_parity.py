"""The async handle and the remote handle cannot drift from UserMemory: same methods,
same parameters (names, kinds, defaults), same docstrings."""

from __future__ import annotations

import inspect

import pytest

from memstrata import UserMemory
from memstrata.aio import AsyncUserMemory
from memstrata.user import LOCAL_ONLY, SURFACE
from memstrata.client import AsyncClient, AsyncRemoteUserMemory, Client, RemoteUserMemory


def _params(func):
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


def test_the_surface_is_every_public_method_of_usermemory():
    public = {n for n, v in vars(UserMemory).items() if callable(v) and not n.startswith("_")}
    assert public - {"delete"} == set(SURFACE) | set(LOCAL_ONLY)


@pytest.mark.parametrize("name", SURFACE + LOCAL_ONLY)
def test_async_twin_has_the_same_signature_and_doc(name):
    sync, twin = getattr(UserMemory, name), getattr(AsyncUserMemory, name)
    assert inspect.iscoroutinefunction(twin)
    assert _params(twin) == _params(sync)
    assert twin.__doc__ == sync.__doc__


@pytest.mark.parametrize("name", SURFACE)
def test_remote_handle_has_the_same_signature_and_doc(name):
    sync, remote = getattr(UserMemory, name), getattr(RemoteUserMemory, name)
    assert _params(remote) == _params(sync)
    assert remote.__doc__ == sync.__doc__


@pytest.mark.parametrize("name", SURFACE + ("export",))
def test_async_remote_handle_matches_the_remote_one(name):
    remote, twin = getattr(RemoteUserMemory, name), getattr(AsyncRemoteUserMemory, name)
    assert inspect.iscoroutinefunction(twin)
    assert _params(twin) == _params(remote)
    assert twin.__doc__ == remote.__doc__


def test_async_client_has_the_methods_of_client():
    def public(cls):
        return {n: v for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}

    sync, twin = public(Client), public(AsyncClient)
    assert set(sync) == set(twin) and {"flush", "user", "users", "me", "close"} <= set(sync)
    for name in sync:
        if name != "user":  # the handle is made at once; its calls are awaited
            assert inspect.iscoroutinefunction(twin[name]), name
        assert _params(twin[name]) == _params(sync[name]), name
