"""Caches that let the service skip work already done: one byte-store interface (`Cache`), kept
in this process within a byte budget or in Redis, and the keys the pipeline derives for it."""
