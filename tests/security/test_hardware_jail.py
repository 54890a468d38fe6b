"""The hardware stage builds and runs the job's program in the sandbox (issue 24.1, 24.3): the kernels are C++ of the
job's making, and the kernel JIT compiles them and loads them into the program. Through real Redis, a real compile
worker and a real hardware worker whose device is emulated (its node handed to the job open):

a forged compile answer carries the genuine artifacts, so main.cpp is the plan's own and every kernel passes the
preprocessor's check, plus a static constructor in reader.cpp that runs `id`, writes into a world-writable
directory outside any sandbox, reads a secret of the worker's environment and a root-only file, and writes into the
hardware worker's shared kernel cache; its compute kernel computes 2 * A where the source says A, and the forged
verify answer says the run passed. The constructor runs (it prints), but as nobody, in a root of its own: none of
it reaches the host, and the job fails (the verdict is the worker's, from the reference)."""
from __future__ import annotations

import json
import time
import uuid

import numpy as np
import pytest

from compiler.toolchain import cache
from compiler.toolchain.emulate import runtime_root
from compiler.toolchain.sdk_headers import headers_dir
from service.embedded import worker_command
from tests.security.forging import compile_forgery, forging_kernel, genuine_compile
from tests.service.conftest import Proc, Service, base_env, private_db

ARCH = "wormhole_b0"
SECRET = f"worker-secret-{uuid.uuid4().hex}"


def canary(canary_dir, root_only, shared_cache, programs) -> bytes:
    """A static constructor that tries everything a program loaded as the worker could, and prints what it got."""
    return f'''extern "C" int printf(const char*, ...);
extern "C" int system(const char*);
extern "C" char* getenv(const char*);
extern "C" unsigned getuid();
extern "C" void* fopen(const char*, const char*);
extern "C" int fputs(const char*, void*);
extern "C" char* fgets(char*, int, void*);
extern "C" int fclose(void*);
extern "C" long write(int, const void*, unsigned long);
extern "C" int atoi(const char*);
static int tilefarm_canary = [] {{
    printf("CANARY ran as uid %u\\n", getuid());
    system("id; id > {canary_dir}/hardware-id.txt 2>&1");
    if (void* f = fopen("{canary_dir}/hardware-ctor.txt", "w")) {{ fputs("here", f); fclose(f); }}
    const char* secret = getenv("TILEFARM_TEST_SECRET");
    printf("CANARY secret: %s\\n", secret ? secret : "(none)");
    char line[128] = "(unreadable)";
    if (void* f = fopen("{root_only}", "r")) {{ fgets(line, sizeof line, f); fclose(f); }}
    printf("CANARY root-only file: %s\\n", line);
    void* poison = fopen("{shared_cache}/kernels/poison.so", "w");
    printf("CANARY shared kernel cache: %s\\n", poison ? "written" : "refused");
    if (poison) {{ fputs("poison", poison); fclose(poison); }}
    void* program = fopen("{programs}/poison", "w");
    printf("CANARY device program cache: %s\\n", program ? "written" : "refused");
    if (program) {{ fputs("poison", program); fclose(program); }}
    const char* node = getenv("TTEMU_DEVICE_FD");  // the emulated device's node, handed over open to flock
    printf("CANARY device node: %s\\n", node && write(atoi(node), "poison", 6) == 6 ? "written" : "refused");
    return 0;
}}();
'''.encode()


@pytest.fixture(scope="module")
def farm(redis_url, tmp_path_factory):  # noqa: F811
    workdir = tmp_path_factory.mktemp("hardware-jail")
    node = workdir / "emu-wh-0.node"
    node.touch()
    config = workdir / "devices.json"
    config.write_text(json.dumps({"devices": [{"id": "emu-wh-0", "arch": ARCH, "kind": "emulated", "node": str(node)}]}))
    root_only = workdir / "root-only.txt"
    root_only.write_text(f"root-only-{uuid.uuid4().hex}\n")
    root_only.chmod(0o600)
    shared_cache = workdir / "hardware-kernel-cache"  # the hardware worker's own kernel cache (TTEMU_CACHE_DIR)
    (shared_cache / "kernels").mkdir(parents=True)
    # the hardware worker's build caches (the emulator runtime and the TT-Metalium headers, which no job writes and the
    # test does not look at: the machine's, not fetched and extracted again, 18 MB, for each run)
    caches = workdir / "hardware-cache"
    (caches / "device-programs").mkdir(parents=True)
    env = base_env(TILEFARM_BROKER_URL=private_db(redis_url), TILEFARM_DATA_DIR=str(workdir / "data"),
                   TILEFARM_KEY_PREFIX=f"tilefarm-test-{uuid.uuid4().hex[:8]}:", TILEFARM_HEARTBEAT_S="0.5",
                   TILEFARM_TEST_SECRET=SECRET)
    service = Service(env, workdir)
    # the hardware worker as `tilefarm worker -Q hardware.<arch>` runs it, started with the API and the compile worker
    hardware = Proc(worker_command(f"hardware.{ARCH}", 1, hostname=f"hw-{uuid.uuid4().hex[:6]}@%h"),
                    {**env, "TILEFARM_DEVICES_CONFIG": str(config), "TTEMU_CACHE_DIR": str(shared_cache),
                     "TILEFARM_CACHE_DIR": str(caches), "TTEMU_RUNTIME_DIR": str(runtime_root()),
                     "TILEFARM_SDK_HEADERS_DIR": str(headers_dir())},
                    workdir / "hardware.log")
    service.procs.append(hardware)
    service.start()
    deadline = time.time() + 60
    while not any(d.get("device") == "emu-wh-0" for d in service.client.get("/v1/devices").json()):
        assert hardware.process.poll() is None and time.time() < deadline, hardware.tail()
        time.sleep(0.1)
    service.root_only, service.shared_cache, service.hardware = root_only, shared_cache, hardware
    service.programs, service.node = caches / "device-programs", node
    yield service
    service.stop()
    __import__("redis").Redis.from_url(env["TILEFARM_BROKER_URL"]).flushdb()


def test_a_forged_kernel_runs_jailed_and_its_job_fails(farm, canary_dir):
    answer, files = genuine_compile(ARCH)
    _, doubled = genuine_compile(ARCH, scale=2.0)  # the compute kernel of C = 2 * A
    reader = answer["artifacts"]["reader.cpp"]
    forged_compile = compile_forgery(answer, files, reader_cpp=canary(canary_dir, farm.root_only, farm.shared_cache,
                                                                      farm.programs)
                                     + files[reader], compute_cpp=doubled[answer["artifacts"]["compute.cpp"]])
    forged_verify = (json.dumps({"ok": True, "passed": True, "verification": "PASS", "first_mismatch": None,
                                 "report": {"ok": True, "outputs": []}}), {})
    source = forging_kernel({"compile": forged_compile, "verify": forged_verify})
    a = np.random.default_rng(3).uniform(-1, 1, (64, 64)).astype(np.float32)
    response = farm.client.post("/v1/jobs", json={
        "source": source, "filename": "forge.py", "stages": ["compile", "hardware"], "target": {"arch": ARCH},
        "inputs": {"A": {"shape": [64, 64], "dtype": "float32", "data": a.tolist()}}})
    assert response.status_code == 202, response.text
    job = farm.wait(response.json()["id"], timeout=300)
    log = farm.client.get(f"/v1/jobs/{job['id']}/logs").text
    stdout = farm.client.get(f"/v1/jobs/{job['id']}/artifacts/hardware/stdout.txt")
    printed = stdout.text if stdout.status_code == 200 else log

    assert "CANARY ran as uid" in printed, (job["error"], log[-3000:], farm.hardware.tail())  # it did run
    assert "CANARY ran as uid 0" not in printed and "uid=0(root)" not in printed, printed
    assert "uid=65534(nobody)" in printed, printed
    assert not list(canary_dir.iterdir()), "the kernel wrote outside the sandbox"
    assert SECRET not in printed + log and "secret: (none)" in printed, printed
    assert farm.root_only.read_text().strip() not in printed + log and "root-only file: (unreadable)" in printed
    assert "shared kernel cache: refused" in printed and "device program cache: refused" in printed, printed
    assert "device node: refused" in printed and farm.node.read_bytes() == b"", printed
    assert not (farm.shared_cache / "kernels" / "poison.so").exists() and not (farm.programs / "poison").exists()

    assert job["status"] == "failed", job
    assert job["stages"][-1]["name"] == "hardware" and job["stages"][-1]["state"] == "failed", job["stages"]
    assert job["device_run"]["exit_status"] == 0 and job["device_run"]["device"] == "emu-wh-0"
    assert "refused the sandboxed verify's answer" in job["error"] or "do not match" in job["error"], job["error"]

    # the host program was built apart (no job code ran there) and kept, sealed, where no job writes: the next job
    # with that main.cpp (any kernels) runs it without building
    (entry,) = [p for p in farm.programs.iterdir() if p.is_dir()]
    assert cache.intact(entry / "tilefarm_program") and not job["device_run"]["build_cache_hit"]
    honest = farm.client.post("/v1/jobs", json={
        "source": forging_kernel({}), "filename": "forge.py", "stages": ["compile", "hardware"],
        "target": {"arch": ARCH}, "inputs": {"A": {"shape": [64, 64], "dtype": "float32", "data": a.tolist()}}})
    again = farm.wait(honest.json()["id"], timeout=300)
    assert again["status"] == "succeeded", again["error"]
    assert again["device_run"]["build_cache_hit"] and again["verification"]["passed"], again


def test_a_cached_kernel_the_preprocessor_refuses_never_reaches_a_device(tmp_path):
    """Whoever filled the compile cache (an older version, the CLI), the hardware stage runs the kernels through the
    real preprocessor's check first: a reader that includes a host file is refused before any device is leased
    (on main it was handed to the device run, whose JIT was the only check, and only for an emulated device)."""
    import time as clock

    from compiler import api
    from compiler.toolchain.device import Device
    from farm.settings import Settings
    from farm.store import ArtifactStore, SqliteJobStore
    from schemas.jobs import JobRecord, StageRecord
    from schemas.target import TargetConfig
    from workers import runner
    from workers.devices import DeviceRegistry
    from workers.sandbox import ForgedAnswer

    answer, files = genuine_compile(ARCH)
    artifacts = {name: files[file] for name, file in answer["artifacts"].items()}
    artifacts["reader.cpp"] = b'#include "/etc/shadow"\n' + artifacts["reader.cpp"]
    source, target = forging_kernel({}) + f"\n# {uuid.uuid4().hex}\n", TargetConfig(arch=ARCH)
    key = api.cache_key(source, None, target)
    store, stored = SqliteJobStore(tmp_path / "jobs.sqlite"), ArtifactStore(tmp_path / "data")
    stored.put_cache(key, "compile", {**artifacts, "compile.log": b"", "meta.json": json.dumps(
        {"job_id": "elsewhere", "cache_key": key, "timings": {}}).encode()})
    job, _ = store.create(JobRecord(id="cached", source=source, filename="forge.py", target=target,
                                    created_at=clock.time(), cache_key=key,
                                    stages=[StageRecord(name="compile"), StageRecord(name="hardware")]),
                          idempotency_hash=None, max_active=10)
    node = tmp_path / "emu.node"
    node.touch()
    devices = DeviceRegistry(tmp_path / "data", devices=[Device(id="emu-0", arch=ARCH, kind="emulated", node=str(node))])
    deps = runner.WorkerDeps(store, stored, Settings(sandbox=True, data_dir=tmp_path / "data"), devices=devices)
    with pytest.raises(ForgedAnswer, match=r"(?s)reader\.cpp: .*/etc/shadow"):
        runner.hardware_stage(store.get(job.id), deps)
    assert store.get(job.id).device_run is None and "running on device" not in store.read_log(job.id)


def test_a_card_run_sees_only_its_leased_card(tmp_path):
    """A worker with cards (config `cards`, /dev/tenstorrent on a real host): a device run's child gets a
    /dev/tenstorrent of its own holding only the card the worker leased (where the runtime opens it); the job cannot
    reach another card, nor add one. Regular files in a directory stand in for the cards (no card here)."""
    import dataclasses

    from farm.settings import Settings
    from workers.sandbox import Zygote
    from workers.sandbox.client import SandboxConfig

    (tmp_path / "cards").mkdir()
    card, other = tmp_path / "cards" / "3", tmp_path / "cards" / "4"
    for node in (card, other):
        node.write_text("")
        node.chmod(0o666)
    config = dataclasses.replace(SandboxConfig.from_settings(Settings(data_dir=tmp_path / "data")), cards=str(tmp_path / "cards"))
    zygote = Zygote(config).start()
    try:
        probe = {"write": ["/dev/tenstorrent/3", "/dev/tenstorrent/4", str(other), "/.host/cards/4"],
                 "read": ["/sys/kernel/address_bits"], "run": [["ls", "/dev/tenstorrent", "/.host"]]}
        found = zygote.run("probe", probe, device={"node": str(card), "path": "/dev/tenstorrent/3"}).value["probe"]
        alone = zygote.run("probe", probe).value["probe"]  # a job that is no device run: no card at all
    finally:
        zygote.close()
    assert found["wrote"] == ["/dev/tenstorrent/3"] and card.read_text() == "sandbox was here\n", found
    assert found["ran"]["ls /dev/tenstorrent /.host"]["output"].split() == ["/.host:", "/dev/tenstorrent:", "3"]
    assert set(found["write_errors"]) == {"/dev/tenstorrent/4", str(other), "/.host/cards/4"}, found
    assert other.read_text() == "" and found["read"] == ["/sys/kernel/address_bits"], found  # the card's runtime reads /sys
    assert alone["ran"]["ls /dev/tenstorrent /.host"]["output"].split() == ["/.host:", "/dev/tenstorrent:"], alone
    assert "wrote" not in alone and "/sys/kernel/address_bits" in alone["read_errors"], alone  # no /sys without a card
