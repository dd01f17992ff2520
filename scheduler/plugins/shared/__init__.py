"""What several plugins compute the same way; no plugin lives here and a plugin imports only this, never another plugin."""
