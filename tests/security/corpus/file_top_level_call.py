from tvm.script import tirx as T
__import__('os').system('touch /tmp/tilefarm-canary/canary.txt')
