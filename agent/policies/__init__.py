"""QoS policies: pure functions of (node state, profile[, previous state]) returning intents.

No file access, no clock, no client calls in here — the agent gathers the state,
calls these, and hands the intents to the executor, the evictor and the reporter.
"""
