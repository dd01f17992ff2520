"""Kubernetes mode: informers on the API server feed the cache; binds, evictions and status go back
through the API (``apieffects``), under leader election."""
