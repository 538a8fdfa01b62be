"""herd: what training ranks import from herd (metrics, checkpoints, membership)."""
