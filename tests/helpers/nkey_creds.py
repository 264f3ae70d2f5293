"""NATS nkeys and decentralized-auth credentials made offline, with the ``nkeys`` package
(no ``nsc``): what a nats-server config takes and what a client signs in with.

    user = NkeyUser.make(tmp_path / "worker.nk")   # seed file (SU...), user.public (U...)
    config = f"authorization {{ users: [{{nkey: {user.public}}}] }}"

    op = Operator.make("lab", "AGENTGYM")          # operator, one account, JetStream on
    op.creds(tmp_path / "worker.creds", "worker")  # a user JWT signed by the account + its seed
    op.server_config()                             # operator: JWT, resolver: MEMORY, preload

JWTs are the v2 claims nats-server decodes: header ``{"typ": "JWT", "alg": "ed25519-nkey"}``,
payload signed with the issuer's nkey (operator for itself and the account, account for
users), ``jti`` the base32 SHA-512/256 of the claims, as the jwt library computes it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class Key:
    seed: bytes  # b"S..."

    @classmethod
    def new(cls, prefix: int) -> "Key":
        return cls(nkeys.encode_seed(os.urandom(32), prefix))

    @property
    def public(self) -> str:
        return nkeys.from_seed(bytearray(self.seed)).public_key.decode()

    def sign(self, data: bytes) -> bytes:
        return nkeys.from_seed(bytearray(self.seed)).sign(data)


def jwt(issuer: Key, subject: str, name: str, nats: dict[str, Any]) -> str:
    claims: dict[str, Any] = {"jti": "", "iat": int(time.time()), "iss": issuer.public, "name": name,
                              "sub": subject, "nats": {**nats, "version": 2}}
    digest = hashlib.new("sha512_256", json.dumps(claims, separators=(",", ":")).encode()).digest()
    claims["jti"] = base64.b32encode(digest).rstrip(b"=").decode()
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{body}.{_b64(issuer.sign(f'{head}.{body}'.encode()))}"


@dataclass(frozen=True)
class NkeyUser:
    seed_file: Path
    public: str

    @classmethod
    def make(cls, path: Path) -> "NkeyUser":
        key = Key.new(nkeys.PREFIX_BYTE_USER)
        path.write_bytes(key.seed + b"\n")
        path.chmod(0o600)
        return cls(path, key.public)


UNLIMITED = {"subs": -1, "data": -1, "payload": -1}


@dataclass(frozen=True)
class Operator:
    """An operator with one account whose users may use JetStream, and the system account
    (JetStream does not start in operator mode without one)."""

    key: Key
    account: Key
    system: Key
    name: str
    account_name: str

    @classmethod
    def make(cls, name: str, account_name: str) -> "Operator":
        return cls(Key.new(nkeys.PREFIX_BYTE_OPERATOR), Key.new(nkeys.PREFIX_BYTE_ACCOUNT),
                   Key.new(nkeys.PREFIX_BYTE_ACCOUNT), name, account_name)

    def operator_jwt(self) -> str:
        return jwt(self.key, self.key.public, self.name, {"type": "operator"})

    def account_jwt(self) -> str:
        limits = {**UNLIMITED, "imports": -1, "exports": -1, "wildcards": True, "conn": -1, "leaf": -1,
                  "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
        return jwt(self.key, self.account.public, self.account_name,
                   {"type": "account", "limits": limits, "default_permissions": {"pub": {}, "sub": {}}})

    def creds(self, path: Path, user: str, *, permissions: dict[str, Any] | None = None,
              signer: Key | None = None) -> Path:
        """A .creds file for a new user of the account (``signer``: another account's key, for a
        user the server must refuse). ``permissions``: ``{"pub": {"allow": [...]}, "sub": ...}``."""
        key = Key.new(nkeys.PREFIX_BYTE_USER)
        token = jwt(signer or self.account, key.public, user,
                    {"type": "user", **UNLIMITED, "pub": {}, "sub": {}, **(permissions or {})})
        path.write_text(f"-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n"
                        f"************************* IMPORTANT *************************\n"
                        f"NKEY Seed printed below can be used to sign and prove identity.\n\n"
                        f"-----BEGIN USER NKEY SEED-----\n{key.seed.decode()}\n------END USER NKEY SEED------\n")
        path.chmod(0o600)
        return path

    def server_config(self) -> str:
        system = jwt(self.key, self.system.public, "SYS", {"type": "account", "limits": {**UNLIMITED}})
        return (f"operator: {self.operator_jwt()}\n"
                f"system_account: {self.system.public}\n"
                f"resolver: MEMORY\n"
                f"resolver_preload: {{\n  {self.account.public}: {self.account_jwt()}\n"
                f"  {self.system.public}: {system}\n}}\n")
