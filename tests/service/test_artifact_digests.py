"""The artifact manifest and each artifact's ETag are the sha256 of the bytes served (read once per stored file,
then remembered: a job page polls the manifest while its job runs), and an If-None-Match of it answers 304."""
from __future__ import annotations

import hashlib
import uuid

from tests.service.conftest import kernel


def test_manifest_etag_and_bytes_agree(redis_service):
    job = redis_service.wait(redis_service.submit(kernel("gemm.py") + f"\n# {uuid.uuid4().hex}\n")["id"], timeout=300)
    client = redis_service.client
    manifest = client.get(f"/v1/jobs/{job['id']}/artifacts").json()["artifacts"]
    assert {"reader.cpp", "tt.plan.json"} <= {a["name"] for a in manifest}
    for entry in manifest:
        response = client.get(f"/v1/jobs/{job['id']}/artifacts/{entry['name']}")
        assert response.status_code == 200 and len(response.content) == entry["size"]
        assert hashlib.sha256(response.content).hexdigest() == entry["sha256"]
        assert response.headers["etag"] == f'"{entry["sha256"]}"'
        assert response.headers["content-type"].split(";")[0] == entry["media_type"]
        again = client.get(f"/v1/jobs/{job['id']}/artifacts/{entry['name']}",
                           headers={"If-None-Match": response.headers["etag"]})
        assert again.status_code == 304 and not again.content
    assert client.get(f"/v1/jobs/{job['id']}/artifacts").json()["artifacts"] == manifest
