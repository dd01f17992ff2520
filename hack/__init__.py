"""Scripts around Scoria: set-up, the demo, benchmarks; ``hack.lib`` is what they share (and the tests use)."""
