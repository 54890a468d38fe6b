"""Python's parser, one thread at a time.

CPython 3.11 converts between its C and Python syntax trees with a recursion-depth counter kept in interpreter-wide
state; a conversion interrupted by another thread's (a garbage-collection callback can switch threads mid-way)
leaves the counter wrong, and the next one raises `SystemError: AST constructor recursion depth mismatch` (CPython
gh-106905). The service parses submitted source in its request threads (a full run's async-client test got a 500
from it), so every parse and every compile of a tree goes through one lock.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(text, filename=filename)


def compile_tree(tree: ast.AST, filename: str):
    """The code object of a module tree (`compile(tree, filename, "exec")`, not inheriting our future flags)."""
    with _LOCK:
        return compile(tree, filename, "exec", dont_inherit=True)
