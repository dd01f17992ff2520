"""What several actions do the same way; no action lives here and an action imports only this, never another action."""
