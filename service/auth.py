"""API keys -> teams. Keys are kept only as sha256 digests (farm/api_keys.py); a presented key is hashed on arrival
and dropped.

The dashboard's session is the key itself in an HttpOnly, SameSite=Strict cookie (set by POST /ui/session): page
scripts never hold it, and it is honoured only on same-origin requests. An admin key sees every team's jobs (the
farm).
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass
from collections.abc import Mapping

from farm.api_keys import digest, parse_keys_file
from farm.settings import Settings

SESSION_COOKIE = "tilefarm_token"
SESSION_MAX_AGE_S = 30 * 86400


@dataclass(frozen=True)
class Principal:
    team: str
    admin: bool = False


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


def keyring(settings: Settings) -> KeyRing:
    """The configured keys (TILEFARM_API_TOKENS, TILEFARM_API_KEYS_FILE) as TILEFARM_AUTH wants them used."""
    if settings.auth == "off":
        return KeyRing({}, required=False)
    tokens = settings.api_tokens + (parse_keys_file(settings.api_keys_file) if settings.api_keys_file else [])
    return KeyRing({token.sha256: Principal(token.team, token.admin) for token in tokens}, required=settings.auth == "on")


def same_origin(headers: Mapping[str, str], origin: str) -> bool:
    """Whether a browser sent the request from one of our own pages (Fetch Metadata, else the Origin header): the
    session cookie is honoured only then, so no other site can act with it even where SameSite is not enforced."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    sent = headers.get("origin")
    return sent is None or sent == origin
