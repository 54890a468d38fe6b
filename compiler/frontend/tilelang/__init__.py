"""TileLang frontend: `import tilelang.language as T` kernels (module-level prim_funcs or kernel factories) ->
TIRx tile-level TVMScript with a line map back to the user's file. Never imports the real tilelang package."""
from .evaluate import TracedKernel, is_tilelang_source, trace

__all__ = ["TracedKernel", "is_tilelang_source", "trace"]
