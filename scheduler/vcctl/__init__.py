"""vcctl's commands (``python -m scheduler job|queue ...``) over a backend: the embedded scheduler or a cluster."""
