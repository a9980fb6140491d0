"""A secured front for Tansu, for tests: TLS, mutual TLS, and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER).

No broker on this machine authenticates by itself (see shared/notes/secure-kafka.md): Tansu
listens in plaintext on a hidden port and advertises this front's port, and the front checks
the client's certificate and login before it relays any byte.  The SASL check follows Kafka's
wire protocol (SaslHandshake v0-1, SaslAuthenticate v0-1) and RFC 5802/7677 for SCRAM; a
failed login gets Kafka's error 58 and its message, and the connection is closed.  For
OAUTHBEARER the front also serves an OAuth token endpoint (client-credentials grant) over
HTTPS, and accepts only tokens it issued.

Run as a process:  python -m tests.kafka_front --listen P --backend P --cert F --key F
                   [--ca F --require-cert] [--sasl MECH --user NAME:PASSWORD] [--token-port P]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import ssl
import struct
from dataclasses import dataclass

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_ITERATIONS = 4096


@dataclass
class _Scram:
    salt: bytes
    stored_key: bytes
    server_key: bytes


def _scram_entry(mechanism: str, password: str) -> _Scram:
    name = _HASHES[mechanism]
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, _ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return _Scram(salt, hashlib.new(name, client_key).digest(), hmac.new(salted, b"Server Key", name).digest())


def _frame(correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class Front:
    def __init__(self, backend: int, mechanism: str | None, users: dict[str, str]) -> None:
        self.backend = backend
        self.mechanism = mechanism
        self.users = users
        self.tokens: set[str] = set()  # issued by the token endpoint
        self.scram = {u: _scram_entry(mechanism, p) for u, p in users.items()} if mechanism in _HASHES else {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend)
        except OSError:
            writer.close()
            return
        try:
            if self.mechanism is None or await self._login(reader, writer, up_reader, up_writer):
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _login(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> bool:
        scram_state: dict[str, object] = {}
        handshaken = False
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            payload = await reader.readexactly(size)
            api_key, version, correlation = struct.unpack(">hhi", payload[:8])
            client_len = struct.unpack(">h", payload[8:10])[0]
            body = payload[10 + max(client_len, 0):]
            if api_key == 18:  # ApiVersions goes to the broker as it is
                up_writer.write(struct.pack(">i", size) + payload)
                await up_writer.drain()
                length = await up_reader.readexactly(4)
                writer.write(length + await up_reader.readexactly(struct.unpack(">i", length)[0]))
                await writer.drain()
            elif api_key == 17:  # SaslHandshake
                asked = body[2:2 + struct.unpack(">h", body[:2])[0]].decode()
                error = 0 if asked == self.mechanism else 33
                handshaken = error == 0
                writer.write(_frame(correlation, struct.pack(">hi", error, 1) + _string(self.mechanism)))
                await writer.drain()
                if not handshaken:
                    return False
            elif api_key == 36 and handshaken and version <= 1:  # SaslAuthenticate
                token = body[4:4 + struct.unpack(">i", body[:4])[0]]
                reply, done = self._authenticate(token, scram_state)
                if reply is None:
                    message = ("Authentication failed during authentication due to invalid credentials with SASL "
                               f"mechanism {self.mechanism}")
                    out = struct.pack(">h", 58) + _string(message) + struct.pack(">i", 0)
                    if version >= 1:
                        out += struct.pack(">q", 0)
                    writer.write(_frame(correlation, out))
                    await writer.drain()
                    return False
                out = struct.pack(">h", 0) + _string(None) + struct.pack(">i", len(reply)) + reply
                if version >= 1:
                    out += struct.pack(">q", 0)
                writer.write(_frame(correlation, out))
                await writer.drain()
                if done:
                    return True
            else:
                return False  # anything else before a login closes the connection, as Kafka does

    def _authenticate(self, token: bytes, state: dict[str, object]) -> tuple[bytes | None, bool]:
        if self.mechanism == "OAUTHBEARER":
            fields = dict(f.split("=", 1) for f in token.decode(errors="replace").split("\x01") if "=" in f)
            bearer = fields.get("auth", "").removeprefix("Bearer ")
            return (b"", True) if bearer in self.tokens else (None, False)
        if self.mechanism == "PLAIN":
            parts = token.split(b"\0")
            ok = len(parts) == 3 and self.users.get(parts[1].decode()) == parts[2].decode()
            return (b"", True) if ok else (None, False)
        name = _HASHES[self.mechanism or ""]
        if "first" not in state:
            bare = token.decode().split(",", 2)[2]  # gs2 header "n,," then n=USER,r=NONCE
            fields = dict(item.split("=", 1) for item in bare.split(","))
            entry = self.scram.get(fields.get("n", ""))
            if entry is None:
                return None, False
            nonce = fields["r"] + base64.b64encode(os.urandom(18)).decode()
            first = f"r={nonce},s={base64.b64encode(entry.salt).decode()},i={_ITERATIONS}"
            state.update(first=first, bare=bare, entry=entry, nonce=nonce)
            return first.encode(), False
        final = token.decode()
        without_proof, _, proof = final.rpartition(",p=")
        fields = dict(item.split("=", 1) for item in without_proof.split(","))
        entry: _Scram = state["entry"]  # type: ignore[assignment]
        if fields.get("r") != state["nonce"]:
            return None, False
        auth = f"{state['bare']},{state['first']},{without_proof}".encode()
        signature = hmac.new(entry.stored_key, auth, name).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=False))
        if hashlib.new(name, client_key).digest() != entry.stored_key:
            return None, False
        server_signature = hmac.new(entry.server_key, auth, name).digest()
        return f"v={base64.b64encode(server_signature).decode()}".encode(), True


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _token_endpoint(front: Front, port: int, cert: str, key: str) -> None:
    """POST /token with the client-credentials grant and HTTP Basic client authentication (RFC 6749)."""
    import urllib.parse

    from aiohttp import web

    async def issue(request: web.Request) -> web.Response:
        form = await request.post()
        try:
            user, _, secret = base64.b64decode(request.headers.get("Authorization", "")[6:]).decode().partition(":")
        except ValueError:
            user = secret = ""
        client, secret = urllib.parse.unquote(user), urllib.parse.unquote(secret)
        if form.get("grant_type") != "client_credentials" or front.users.get(client) != secret:
            return web.json_response({"error": "invalid_client"}, status=401)
        token = base64.urlsafe_b64encode(os.urandom(24)).decode()
        front.tokens.add(token)
        return web.json_response({"access_token": token, "token_type": "Bearer", "expires_in": 300})

    app = web.Application()
    app.router.add_post("/token", issue)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()


async def _main(args: argparse.Namespace) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    if args.ca:
        context.load_verify_locations(args.ca)
        context.verify_mode = ssl.CERT_REQUIRED if args.require_cert else ssl.CERT_OPTIONAL
    users = dict(u.split(":", 1) for u in args.user)
    front = Front(args.backend, args.sasl, users)
    if args.token_port:
        await _token_endpoint(front, args.token_port, args.cert, args.key)
    server = await asyncio.start_server(front.handle, "127.0.0.1", args.listen, ssl=context)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--backend", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--ca")
    parser.add_argument("--require-cert", action="store_true")
    parser.add_argument("--sasl")
    parser.add_argument("--user", action="append", default=[])
    parser.add_argument("--token-port", type=int)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
