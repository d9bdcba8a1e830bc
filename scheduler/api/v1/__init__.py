"""REST API v1 (docs/api.md): /api/v1/. Bearer tokens or the console's session, an OpenAPI schema,
idempotent submissions, log following, server-sent job changes. Reads through the selectors and
writes through the services. The first API (/api/) was removed: its paths answer 410 naming their
v1 replacement (scheduler.api.gone)."""
