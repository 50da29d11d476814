"""A run's one look at a cluster (or a backup or restore), built on operations and clients."""
