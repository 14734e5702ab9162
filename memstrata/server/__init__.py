"""memstrata as a service: REST + OpenAPI (FastAPI), tenants and API keys, an audit log,
rate limits, metrics, the MCP endpoint and the OpenAI-compatible memory proxy.

Needs ``pip install 'memstrata[server]'``. Start it with ``memstrata serve``, or build
the app with :func:`create_app`. See ``docs/service.md``.
"""

from .app import Service, create_app
from .keys import Keys, NewKey
from .settings import SERVER_SETTINGS, ServerSettings

__all__ = ["create_app", "Service", "Keys", "NewKey", "ServerSettings", "SERVER_SETTINGS"]
