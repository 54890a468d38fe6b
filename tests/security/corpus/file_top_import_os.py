import os
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64,), "float32")):
    T.evaluate(0)
