"""A seccomp filter for the job's child, written as a classic BPF program (as nsjail and Compiler Explorer's
sandboxes do; no library needed): the job keeps every syscall a compiler, an emulator or Python uses, and loses
those that reach beyond its own process: new namespaces (unshare, setns, clone with CLONE_NEW*: no `unshare -U -r`
to become root in a user namespace of its own), mounts, ptrace and reading other processes' memory, kernel
keyrings, eBPF, perf, userfaultfd, io_uring (whose operations seccomp does not see), modules, kexec, reboot, swap,
clocks, raw I/O ports. They fail with EPERM; clone3, whose flags seccomp cannot read, fails with ENOSYS so that
the C library falls back to clone. A syscall of another ABI (i386, x32) kills the process.

    program = build()       # once, in the zygote
    install(program)        # in the child, after no_new_privs: for it and everything it starts
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# linux/audit.h, linux/seccomp.h, linux/filter.h
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
NR, ARCH, ARG0 = 0, 4, 16             # offsets in struct seccomp_data (arg0's low 32 bits, little-endian)

CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
             "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}
SYS_CLONE, SYS_CLONE3 = 56, 435
DENIED = {  # x86_64 numbers (asm/unistd_64.h)
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
    "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303, "quotactl": 179, "quotactl_fd": 443,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "syslog": 103, "vhangup": 153, "uselib": 134,
    "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "iopl": 172, "ioperm": 173,
    "modify_ldt": 154, "lookup_dcookie": 212, "nfsservctl": 180, "_sysctl": 156,
}


def build() -> bytes:
    """The filter program: struct sock_filter[] (u16 code, u8 jt, u8 jf, u32 k)."""
    deny, enosys = "deny", "enosys"
    program: list[tuple[int, object, object, int]] = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ, 1, 0, AUDIT_ARCH_X86_64),
        (RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, NR),
        (JGE, deny, 0, X32_SYSCALL_BIT),
        (JEQ, "clone", 0, SYS_CLONE),
        (JEQ, enosys, 0, SYS_CLONE3),
        *((JEQ, deny, 0, number) for number in sorted(set(DENIED.values()))),
        (RET, 0, 0, SECCOMP_RET_ALLOW),
    ]
    labels = {"clone": len(program)}
    program += [(LD_W_ABS, 0, 0, ARG0), (JSET, deny, 0, sum(CLONE_NEW.values())), (RET, 0, 0, SECCOMP_RET_ALLOW)]
    labels[deny] = len(program)
    program.append((RET, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    labels[enosys] = len(program)
    program.append((RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS))
    code = b""
    for index, (op, jt, jf, k) in enumerate(program):
        jumps = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        assert all(0 <= j <= 255 for j in jumps), "a jump out of BPF's reach"
        code += struct.pack("<HBBI", op, jumps[0], jumps[1], k)
    return code


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)


def install(program: bytes) -> None:
    """Load the filter for this process and all it starts (no_new_privs must be set). OSError if refused, or on
    a machine whose syscall numbers these are not (the filter would kill every process there)."""
    if platform.machine() != "x86_64":
        raise OSError(errno.ENOSYS, f"the filter is written for x86_64, not {platform.machine()}")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp filter refused: {os.strerror(error)}")
