"""API keys as configured: each key's sha256 digest, its team and whether it is an admin's, never the key itself.

Sources: TILEFARM_API_TOKENS (`key:team[:admin]`, comma-separated; read with the settings) and TILEFARM_API_KEYS_FILE
(one key a line: `<key or sha256:HEX> <team> [admin]`, `#` comments). The service looks presented keys up among them
(service/auth.py).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ApiToken(BaseModel):
    """One configured API key, as kept: its sha256 digest, never the key."""

    model_config = ConfigDict(frozen=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    team: str = Field(min_length=1, max_length=64)
    admin: bool = False


def digest(key: str) -> str:
    return hashlib.sha256(key.strip().encode()).hexdigest()


def _entry(key: str, team: str, flags: list[str]) -> ApiToken:
    key = key.strip()
    hashed = key.removeprefix("sha256:").lower() if key.startswith("sha256:") else digest(key)
    if len(hashed) != 64 or not team.strip():
        raise ValueError("an API key entry needs a key (or sha256:<64 hex>) and a team")
    return ApiToken(sha256=hashed, team=team.strip()[:64], admin="admin" in [f.strip() for f in flags])


def parse_tokens(spec: str) -> list[ApiToken]:
    """`key:team[:admin],...` (or `sha256:HEX:team[:admin]`) -> the keys' digests and teams."""
    tokens = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        fields = item.split(":")
        if fields[0] == "sha256" and len(fields) >= 3:  # sha256:HEX:team[:admin]
            fields = [f"sha256:{fields[1]}", *fields[2:]]
        if len(fields) < 2:
            raise ValueError("TILEFARM_API_TOKENS entries are key:team or key:team:admin")
        tokens.append(_entry(fields[0], fields[1], fields[2:]))
    return tokens


def parse_keys_file(path: Path) -> list[ApiToken]:
    tokens = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{number}: expected '<key or sha256:HEX> <team> [admin]'")
        tokens.append(_entry(fields[0], fields[1], fields[2:]))
    return tokens
