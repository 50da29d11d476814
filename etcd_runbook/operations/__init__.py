"""Single steps against a live system, built on the clients."""
