from tvm.script import tirx as T
@T.prim_func
def main(:
