"""The API server's answer to a refused request, as the client library hands it over."""

from __future__ import annotations

import json


def status_body(exc: Exception) -> dict:
    """The Status object in ``exc``'s body (an ``ApiException``'s); ``{}`` when it has none or it is not JSON."""
    try:
        body = json.loads(getattr(exc, "body", None) or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}
