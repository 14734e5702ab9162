"""The service's routers: one module per resource family."""
