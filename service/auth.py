"""API keys -> teams. Keys are kept only as sha256 digests; the plaintext is hashed on arrival and dropped.

The dashboard's session is the key itself in an HttpOnly, SameSite=Strict cookie (set by POST /ui/session): page
scripts never hold it, and it is honoured only on same-origin requests.

Sources: TILEFARM_API_TOKENS (`key:team[:admin]`, comma-separated) and TILEFARM_API_KEYS_FILE (one key a line:
`<key or sha256:HEX> <team> [admin]`, `#` comments). An admin key sees every team's jobs (the farm).
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path

SESSION_COOKIE = "tilefarm_token"
SESSION_MAX_AGE_S = 30 * 86400


@dataclass(frozen=True)
class Principal:
    team: str
    admin: bool = False


def digest(key: str) -> str:
    return hashlib.sha256(key.strip().encode()).hexdigest()


def _entry(key: str, team: str, flags: list[str]) -> tuple[str, Principal]:
    key = key.strip()
    hashed = key.removeprefix("sha256:").lower() if key.startswith("sha256:") else digest(key)
    if len(hashed) != 64 or not team.strip():
        raise ValueError("an API key entry needs a key (or sha256:<64 hex>) and a team")
    return hashed, Principal(team.strip()[:64], admin="admin" in [f.strip() for f in flags])


def parse_tokens(spec: str) -> dict[str, Principal]:
    """`key:team[:admin],...` -> {sha256(key): Principal}."""
    keys = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        fields = item.split(":")
        if fields[0] == "sha256" and len(fields) >= 3:  # sha256:HEX:team[:admin]
            fields = [f"sha256:{fields[1]}", *fields[2:]]
        if len(fields) < 2:
            raise ValueError("TILEFARM_API_TOKENS entries are key:team or key:team:admin")
        hashed, principal = _entry(fields[0], fields[1], fields[2:])
        keys[hashed] = principal
    return keys


def parse_keys_file(path: Path) -> dict[str, Principal]:
    keys = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{number}: expected '<key or sha256:HEX> <team> [admin]'")
        hashed, principal = _entry(fields[0], fields[1], fields[2:])
        keys[hashed] = principal
    return keys


class KeyRing:
    def __init__(self, keys: dict[str, Principal], required: bool):
        self.keys, self.required = keys, required

    @property
    def enabled(self) -> bool:
        return self.required or bool(self.keys)

    def lookup(self, presented: str) -> Principal | None:
        """Constant-time compare of digests (the presented key is hashed at once and not kept)."""
        if not presented:
            return None
        wanted = digest(presented)
        found = None
        for known, principal in self.keys.items():
            if hmac.compare_digest(known, wanted):
                found = principal
        return found


def same_origin(headers: Mapping[str, str], origin: str) -> bool:
    """Whether a browser sent the request from one of our own pages (Fetch Metadata, else the Origin header): the
    session cookie is honoured only then, so no other site can act with it even where SameSite is not enforced."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    sent = headers.get("origin")
    return sent is None or sent == origin
