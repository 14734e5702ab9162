"""The inspector: web pages, served by the service at ``/ui``, where a person sees,
corrects and forgets what is remembered about them (and an operator debugs why).

Same keys as the REST API: an end-user key sees and edits only its own memory, an
``app`` or ``admin`` key its tenant's users, ``admin`` also the operations pages. The
browser carries the key as a signed HttpOnly session cookie (:mod:`.session`); every
page has a JSON twin (``?format=json``); everything is served from here (no CDN, no
build step). See ``docs/inspector.md``.
"""

from .ops import router as _tenant_pages
from .pages import router

router.include_router(_tenant_pages)

__all__ = ["router"]
