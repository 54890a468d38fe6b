"""The client unpacks what a server sent: a bundle is untrusted input too (a server may be compromised, or a
bundle's files shaped by a job). tilefarm.client.unpack_bundle takes plain files and folders only, within its caps,
and leaves nothing behind when it refuses one."""
from __future__ import annotations

import io
import os
import tarfile

import pytest

from tilefarm.client import BundleRefused, unpack_bundle

TOP = "tilefarm-0123456789abcdef"


def bundle(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


class Zeros(io.RawIOBase):
    """`size` zero bytes, read without ever holding them."""

    def __init__(self, size: int):
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def zero_bomb(size: int) -> bytes:
    """A tar.gz of one member of `size` zeros (the finding: 204 KB that unpacked to 200 MB)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as archive:
        info = tarfile.TarInfo(f"{TOP}/emulate/C.npy")
        info.size = size
        archive.addfile(info, io.BufferedReader(Zeros(size)))
    return buffer.getvalue()


def everything_under(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, dirs, files in os.walk(path) for n in dirs + files)


def test_a_genuine_bundle_unpacks(tmp_path):
    data = bundle(special(TOP, tarfile.DIRTYPE), file(f"{TOP}/reader.cpp", b"// kernel\n", mode=0o4755),
                  special(f"{TOP}/emulate", tarfile.DIRTYPE), file(f"{TOP}/emulate/report.json", b"{}"))
    written = unpack_bundle(data, tmp_path / "out")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == ["emulate/report.json", "reader.cpp"]
    assert (tmp_path / "out" / "reader.cpp").read_bytes() == b"// kernel\n"
    assert (tmp_path / "out" / "reader.cpp").stat().st_mode & 0o7777 == 0o644  # no set-uid from the archive


def test_a_decompression_bomb_is_refused_without_being_unpacked(tmp_path):
    data = zero_bomb(200 * 1024 * 1024)
    assert len(data) < 300 * 1024  # ~204 KB, as found
    with pytest.raises(BundleRefused, match="more than 67108864 bytes"):
        unpack_bundle(data, tmp_path / "out", max_bytes=64 * 1024 * 1024)
    assert everything_under(tmp_path / "out") == []


def test_a_bomb_of_many_small_members_is_refused(tmp_path):
    data = bundle(*(file(f"{TOP}/f{i}", b"") for i in range(1500)))
    with pytest.raises(BundleRefused, match="more than 1000 members"):
        unpack_bundle(data, tmp_path / "out", max_members=1000)
    assert everything_under(tmp_path / "out") == []


@pytest.mark.parametrize("member", [
    special(f"{TOP}/link", tarfile.SYMTYPE, "/etc/passwd"),
    special(f"{TOP}/inside-link", tarfile.SYMTYPE, "reader.cpp"),       # even one that stays inside
    special(f"{TOP}/hard", tarfile.LNKTYPE, f"{TOP}/reader.cpp"),
    special(f"{TOP}/tty", tarfile.CHRTYPE),
    special(f"{TOP}/disk", tarfile.BLKTYPE),
    special(f"{TOP}/fifo", tarfile.FIFOTYPE),
    file("/tmp/tilefarm-canary/absolute.txt"),
    file(f"{TOP}/../../escaped.txt"),
    file(f"{TOP}/emulate/../../escaped.txt"),
    file(f"{TOP}/a\\..\\..\\escaped.txt"),
    file(f"{TOP}//double-slash.txt"),
], ids=lambda m: m[0].name)
def test_links_devices_and_paths_out_are_refused(tmp_path, member):
    data = bundle(file(f"{TOP}/reader.cpp", b"// kernel\n"), member, file(f"{TOP}/after.txt"))
    with pytest.raises(BundleRefused):
        unpack_bundle(data, tmp_path / "out")
    assert everything_under(tmp_path / "out") == []  # what came before the bad member is taken back too
    assert not (tmp_path / "escaped.txt").exists() and not os.path.exists("/tmp/tilefarm-canary/absolute.txt")


def test_a_link_already_in_the_destination_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "emulate").symlink_to(outside)
    (tmp_path / "out" / "reader.cpp").symlink_to(outside / "reader.cpp")
    for name in ("emulate/report.json", "reader.cpp"):
        with pytest.raises(BundleRefused, match="through the link"):
            unpack_bundle(bundle(file(f"{TOP}/{name}")), tmp_path / "out")
    assert list(outside.iterdir()) == []


def test_not_a_bundle_at_all(tmp_path):
    with pytest.raises(BundleRefused, match="not a tar.gz"):
        unpack_bundle(b"<html>502 Bad Gateway</html>", tmp_path / "out")
