from tvm.script import tirx as T


@T.prim_func
def k0(A: T.Buffer((64,), "float32")):
    T.evaluate(0)


@T.prim_func
def k1(A: T.Buffer((64,), "float32")):
    T.evaluate(0)


@T.prim_func
def k2(A: T.Buffer((64,), "float32")):
    T.evaluate(0)
