"""The scheduling framework: snapshot, session, statement, plugin and action registries, configuration."""
