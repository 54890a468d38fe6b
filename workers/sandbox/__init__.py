"""Run the steps that touch user-derived input (parse, passes, codegen, header check, emulator build + run, a device
program's build + run with its kernel JIT, the reference a device run is held to)
outside the worker's process, in a restricted child of a pre-imported zygote.

    zygote = Zygote(SandboxConfig.from_settings(settings))    # once per worker process: imports tvm (~1 s)
    result = zygote.run("compile", {"source": ..., ...}, limits)   # per job: a prepared child, restricted (~ms)
    result.value        # the op's JSON answer;  result.files: {name: bytes} it wrote to out/

The zygote (zygote.py) is a fresh interpreter with a scrubbed environment and no broker or store connections; it
has imported the compiler once and keeps one child prepared ahead of the next job. The job's child (jail.py):

  * is a session leader in new network, mount, PID, IPC and UTS namespaces (where the kernel lets us): no
    network, not even loopback; it sees no host processes; when it ends, everything it started is killed;
  * sees a minimal root of its own (pivot_root into a tmpfs of read-only binds: the interpreter and the packages
    it imports, the C++ toolchain, the SDK headers, a few device nodes, its own /proc), not the host's; its only
    writable place is a private, size-capped tmpfs at /tmp holding its job directory (the inputs read-only);
  * runs as an unprivileged user (nobody) with no supplementary groups, no_new_privs and a seccomp filter
    (seccomp.py: no new namespaces, mounts, ptrace, keyrings, bpf, io_uring...);
  * has rlimits on CPU seconds, address space, file size, open files and processes (and no core dumps);
  * is killed at its wall-clock deadline, when the worker asks (a cancelled job), and as soon as it has answered.

The answer comes back as result.json plus files, bounded in size (client.py). It is untrusted input: the job's
code can write it itself. answers.py holds it to the op's schema, the names that op gives its files and what each
file must contain before anything of it is used or stored; the trusted side never evaluates anything the child
wrote. The operations
a child can run are in ops.py; prefault.py keeps copy-on-write faults off the job's critical path.
"""
from workers.sandbox.answers import ForgedAnswer
from workers.sandbox.client import (SandboxConfig, SandboxResult, Zygote, check_kernels, compile_source,
                                    device_program, emulate, header_check, limits_for, run_on_device, verify, zygote_for)
from workers.sandbox.protocol import Limits, SandboxError, SandboxInterrupted, SandboxTimeout

__all__ = ["ForgedAnswer", "Limits", "SandboxConfig", "SandboxError", "SandboxInterrupted", "SandboxResult", "SandboxTimeout", "Zygote",
           "check_kernels", "compile_source", "device_program", "emulate", "header_check", "limits_for", "run_on_device", "verify",
           "zygote_for"]
