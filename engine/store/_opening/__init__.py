"""Opening a store: which backend a URL names (shown without passwords), what an upgrade does."""
