// No math in this program: the shards only move.
void kernel_main() {}
