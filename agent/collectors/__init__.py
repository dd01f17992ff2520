"""Collectors: each reads one part of the host (through HostPaths or an injected library) into proto.model types."""
