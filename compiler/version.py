"""One version string for everything that can change generated output (used in the cache key and the plan)."""
COMPILER_VERSION = "0.1.0"
