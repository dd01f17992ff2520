"""Simulator mode: manifests from files, the real scheduler with a fixed clock, the end state printed."""
