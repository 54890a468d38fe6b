"""Assertions shared by the Redis-mode and embedded-mode tests."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile

ARTIFACTS = {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json"}


def bundle_members(data: bytes, fmt: str) -> dict[str, bytes]:
    if fmt == "zip":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return {n.split("/", 1)[1]: archive.read(n) for n in archive.namelist()}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return {m.name.split("/", 1)[1]: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def check_bundle(client, job: dict, fmt: str = "tar.gz") -> dict:
    """Download the bundle; every file the manifest lists is there with its size and sha256; the 5 artifacts too."""
    response = client.get(f"/v1/jobs/{job['id']}/bundle", params={"format": fmt})
    assert response.status_code == 200, response.text
    members = bundle_members(response.content, fmt)
    manifest = json.loads(members.pop("manifest.json"))
    listed = {f["name"]: f for f in manifest["files"]}
    assert set(listed) == set(members)
    for name, data in members.items():
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert listed[name]["size"] == len(data)
    assert ARTIFACTS <= set(members)
    assert "logs/job.log" in members and manifest["compiler_version"] and manifest["target"]["arch"] == "wormhole_b0"
    assert manifest["stages"]["compile"]["state"] == "succeeded"
    return members


def check_succeeded(job: dict) -> None:
    assert job["status"] == "succeeded", job
    assert job["stage"] is None and job["timings"]["compile"] > 0
    assert job["diagnostics"] == []
