"""The service's JSON shapes stay equal to the values they describe: response models
list exactly the keys of each ``to_dict()``, request bodies mirror SearchRequest and
ContextRequest, and the Literal enums equal the library's enums."""

from __future__ import annotations

import typing
from dataclasses import fields

from memstrata import ContextRequest, Memory, SearchRequest
from memstrata.server import schemas as s
from memstrata.stores.base import ROLES
from memstrata.types import Kind, Layer, Status


def test_literals_equal_the_enums():
    assert typing.get_args(s.KindName) == tuple(k.value for k in Kind)
    assert typing.get_args(s.StatusName) == tuple(x.value for x in Status)
    assert typing.get_args(s.LayerName) == tuple(x.value for x in Layer)
    assert typing.get_args(s.RoleName) == ROLES


def test_bodies_mirror_the_request_values():
    assert set(s.SearchIn.model_fields) == {f.name for f in fields(SearchRequest)}
    assert set(s.ContextIn.model_fields) == {f.name for f in fields(ContextRequest)}
    assert set(s.Filter.model_fields) == {"session_id", "kind", "status", "layer", "tags", "since", "until"}


def test_response_models_list_every_key_of_to_dict(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", embedder="hash:256", worker="off") as memory:
        lin = memory.user("lin")
        added = lin.add([{"role": "user", "content": "I use Go at work"},
                         {"role": "assistant", "content": "ok"}], "s1")
        item = lin.remember("Prefers short answers", kind="preference")
        lin.update(item.id, content="Prefers very short answers")
        lin.update_profile(name="Lin")
        memory.flush()
        pairs = [
            (s.MessageOut, added.messages[0].to_dict()), (s.ItemOut, item.to_dict()),
            (s.VersionOut, lin.history(item.id)[-1].to_dict()),
            (s.HitOut, lin.search("Go")[0].to_dict()), (s.PartsOut, lin.search("Go")[0].parts.to_dict()),
            (s.ExplainOut, lin.explain("Go").to_dict()), (s.SessionOut, lin.sessions()[0].to_dict()),
            (s.SessionStateOut, lin.session("s1").to_dict()), (s.ProfileOut, lin.profile().to_dict()),
            (s.ProfileVersionOut, lin.profile_history()[0].to_dict()), (s.JobOut, lin.jobs()[0].to_dict()),
            (s.UsageOut, lin.usage().to_dict()), (s.ResumeOut, lin.resume().to_dict()),
            (s.ContextOut, lin.context("s1", budget=500).to_dict()),
            (s.ContextReportOut, lin.context("s1", budget=500).report.to_dict()),
        ]
        from memstrata.server.keys import Keys

        made = Keys(memory.store).create("acme", "end-user", user_id="lin")
        pairs += [(s.KeyOut, made.key.to_dict()), (s.NewKeyOut, {"key": made.key.to_dict(), "token": made.token})]
        for model, data in pairs:
            required = {n for n, f in model.model_fields.items() if f.is_required()}
            assert required <= set(data) <= set(model.model_fields), model.__name__
            model.model_validate(data)


def test_the_server_settings_table_in_the_docs_is_the_generated_one():
    from pathlib import Path

    from memstrata.config import markdown_table
    from memstrata.server.settings import SERVER_SETTINGS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "service.md").read_text()
    assert markdown_table(SERVER_SETTINGS) in doc
