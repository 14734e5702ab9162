"""The inspector's tenant pages: operations (admin keys: jobs and their outcomes, LLM
usage over time as charts, the audit log) and the knowledge base (documents, chunks,
how often each was recalled and used)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from ...usage import usage_report
from .base import Ui, UiRoute, current
from .charts import bar_chart, usage_series

router = APIRouter(route_class=UiRoute, include_in_schema=False)  # mounted under /ui by .pages
Page = Annotated[Ui, Depends(current)]


@router.get("/ops")
def operations(ui: Page) -> Response:
    ui.who.require("admin")
    store = ui.svc.memory.store
    tenant = ui.who.tenant
    scopes = [s for s in store.list_users() if s.namespace == tenant]
    jobs = [j for j in store.list_jobs(limit=100_000) if j.namespace == tenant]
    outcomes = Counter((j.kind, j.status) for j in jobs)
    records = [r for s in scopes for r in store.llm_usage(s)]
    series = usage_series(records)
    data: dict[str, Any] = {
        "tenant": tenant,
        "jobs": {"outcomes": [{"kind": k, "status": s, "count": n} for (k, s), n in sorted(outcomes.items())],
                 "recent": [j.to_dict() for j in reversed(jobs[-50:])]},
        "usage": usage_report(store, scopes).to_dict(),
        "series": {name: [{"label": label, "value": value} for label, value in points]
                   for name, points in series.items()},
        "audit": [e.to_dict() for e in store.list_audit(tenant, limit=100)],
    }
    none = ui.t("none")
    charts = [bar_chart(ui.t("calls"), series["calls"], empty=none),
              bar_chart(ui.t("tokens"), series["tokens"], empty=none),
              bar_chart(ui.t("latency"), series["latency"], digits=2, empty=none)]
    return ui.page("ops.html", data, title=ui.t("operations"), section="ops",
                   rest=("GET /v1/jobs", "GET /v1/usage", "GET /v1/audit"), extra={"charts": charts})


@router.get("/kb")
def knowledge(ui: Page, user: str | None = None) -> Response:
    handle = ui.user(user).kb if user else ui.svc.memory.knowledge(agent_id=ui.who.tenant)
    docs = [d.to_dict() for d in handle.list(limit=500)]
    stale = [c.to_dict() for c in handle.stale(limit=50)]
    data = {"user_id": user, "documents": docs, "stale": stale}
    return ui.page("kb.html", data, title=ui.t("knowledge"), user_id=user, section="kb",
                   rest=("GET /v1/kb/documents", "GET /v1/kb/stale"))


@router.get("/kb/{doc_id}")
def document(doc_id: str, ui: Page, user: str | None = None, private: bool = False) -> Response:
    handle = ui.user(user).kb if user else ui.svc.memory.knowledge(agent_id=ui.who.tenant)
    doc = handle.get(doc_id, private=private and user is not None)
    chunks = [c.to_dict() for c in handle.chunks(doc_id, private=private and user is not None)]
    data = {"user_id": user, "document": doc.to_dict(), "chunks": chunks}
    return ui.page("document.html", data, title=ui.t("knowledge"), user_id=user, section="kb",
                   rest=(f"GET /v1/kb/documents/{doc_id}", f"GET /v1/kb/documents/{doc_id}/chunks"))
