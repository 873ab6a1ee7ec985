"""OAuth 2.1 for `agentfsm mcp-proxy --url ... --oauth`: the `mcp` package's own OAuth
client on the connection to the server, its tokens in a file of their own.

- `FileTokenStorage`: one JSON file per server URL under the store directory (`--oauth-store`,
  else `$XDG_STATE_HOME/agentfsm/oauth`, else `~/.local/state/agentfsm/oauth`), written
  0600 in a 0700 directory, never in the trace. It keeps when the access token expires
  (the package keeps only `expires_in`, which means nothing once the file is read again),
  and the authorization server's metadata found at login, so a refresh after a restart
  goes to the token endpoint the login used.
- `oauth_client`: the package's `OAuthClientProvider` as the `httpx2` auth of the upstream
  connection. The package sends the stored access token, refreshes it when it has expired,
  and stores what it gets. When only a person can authorize (no token stored, or the
  refresh refused) it raises `OAuthLoginError`, which says how to log in.
- `login`: the one interactive step: the authorization URL is printed, and the browser's
  redirect is awaited on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)

__all__ = ["FileTokenStorage", "OAuthLoginError", "default_store", "login", "oauth_client"]

_LOGIN_SECONDS = 600.0
"""How long `login` waits for the browser's redirect."""


class OAuthLoginError(Exception):
    """The server needs an authorization only a person can give: nothing stored answers it."""

    def __init__(self, url: str, store: str | None = None) -> None:
        given = "" if store is None else f" --oauth-store {store}"
        super().__init__(
            f"the MCP server at {url} needs an OAuth authorization and no stored token answers "
            f"it: run `agentfsm mcp-proxy --url {url}{given} --oauth-login` once (it prints the "
            "authorization URL to open in a browser and waits for its redirect on 127.0.0.1), "
            "then start the proxy again"
        )


def default_store() -> Path:
    """Where tokens are kept without `--oauth-store`: the XDG state directory."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agentfsm" / "oauth"


class FileTokenStorage:
    """The package's `TokenStorage` in one file per server URL, readable by its owner only."""

    def __init__(self, store: Path, url: str) -> None:
        self.url = url
        name = hashlib.sha256(url.encode("utf-8")).hexdigest()[:32]
        self.path = store / f"{name}.json"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: as if nothing were stored, so a login is asked for
        return data if isinstance(data, dict) and data.get("server_url") == self.url else {}

    def _write(self, **changes: Any) -> None:
        data = {**self._read(), **changes, "server_url": self.url}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        # Created 0600 before a byte is written: a token is never readable by others.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)

    def stored(self) -> bool:
        """Whether a token is stored for the server (an expired one with a refresh counts)."""
        tokens = self._read().get("tokens")
        return isinstance(tokens, dict) and bool(tokens.get("access_token"))

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._read().get("tokens")
        if not isinstance(tokens, dict):
            return None
        expires_at = tokens.pop("expires_at", None)
        if isinstance(expires_at, int | float):
            tokens["expires_in"] = int(expires_at - time.time())
        with contextlib.suppress(ValueError):
            return OAuthToken.model_validate(tokens)
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            data["expires_at"] = time.time() + int(tokens.expires_in)
        data.pop("expires_in", None)
        self._write(tokens=data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = self._read().get("client_info")
        with contextlib.suppress(ValueError):
            return None if info is None else OAuthClientInformationFull.model_validate(info)
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write(client_info=client_info.model_dump(mode="json", exclude_none=True))

    def metadata(self) -> OAuthMetadata | None:
        """The authorization server's metadata found at login, if any."""
        found = self._read().get("metadata")
        with contextlib.suppress(ValueError):
            return None if found is None else OAuthMetadata.model_validate(found)
        return None

    def set_metadata(self, metadata: OAuthMetadata | None) -> None:
        if metadata is not None:
            self._write(metadata=metadata.model_dump(mode="json", exclude_none=True))


class _Provider(OAuthClientProvider):
    """The package's provider, told what its storage kept across a restart."""

    storage: FileTokenStorage

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        # The package learns a token's expiry only when it gets the token; one read from the
        # file would be sent as if fresh and, once expired, answered 401, which it takes
        # for a login. Its expiry read back makes the package refresh it instead.
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)
        if self.context.oauth_metadata is None:
            self.context.oauth_metadata = self.storage.metadata()


def _metadata(redirect: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name="agentfsm mcp-proxy",
        redirect_uris=[redirect],  # pydantic parses the URL
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


def _provider(
    url: str,
    storage: FileTokenStorage,
    redirect: str,
    redirect_handler: Callable[[str], Awaitable[None]],
    callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> _Provider:
    provider = _Provider(url, _metadata(redirect), storage, redirect_handler, callback_handler)
    provider.storage = storage
    return provider


def oauth_client(url: str, store: Path) -> httpx2.Auth:
    """The auth for the connection to the server at `url`, with the tokens under `store`."""
    storage = FileTokenStorage(store, url)

    async def no_browser(authorization_url: str) -> None:
        raise OAuthLoginError(url, str(store))

    async def no_callback() -> AuthorizationCodeResult:
        raise OAuthLoginError(url, str(store))

    return _provider(url, storage, "http://127.0.0.1/callback", no_browser, no_callback)


async def login(url: str, store: Path, tell: Callable[[str], None]) -> None:
    """Authorize the proxy at the server `url` once, interactively, and store its tokens.

    `tell` shows the authorization URL to the person; the browser's redirect comes back to
    a listener on 127.0.0.1 (on the port the client registered, when it was registered
    before). Any request the server answers with 401 starts the package's flow: an
    `initialize` is sent for it, and its session ended.
    """
    storage = FileTokenStorage(store, url)
    registered = await storage.get_client_info()
    port = 0
    if registered is not None and registered.redirect_uris:
        port = urlsplit(str(registered.redirect_uris[0])).port or 0
    arrived: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()
    listener = await asyncio.start_server(
        lambda r, w: _callback(r, w, arrived), host="127.0.0.1", port=port
    )
    port = listener.sockets[0].getsockname()[1]
    redirect = f"http://127.0.0.1:{port}/callback"

    async def show(authorization_url: str) -> None:
        tell(f"open this URL in a browser to authorize the proxy: {authorization_url}")

    async def wait() -> AuthorizationCodeResult:
        return await asyncio.wait_for(arrived, _LOGIN_SECONDS)

    provider = _provider(url, storage, redirect, show, wait)
    try:
        async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0)) as client:
            response = await client.post(url, json=_INITIALIZE, headers=_POST_HEADERS)
            response.raise_for_status()
            session = response.headers.get("mcp-session-id")
            if session:
                with contextlib.suppress(httpx2.HTTPError):
                    await client.delete(url, headers={"mcp-session-id": session})
    finally:
        listener.close()
    storage.set_metadata(provider.context.oauth_metadata)
    if not storage.stored():
        raise OAuthLoginError(url)


_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "agentfsm-mcp-proxy-login", "version": "1"},
    },
}
_POST_HEADERS = {"Accept": "application/json, text/event-stream"}


async def _callback(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    arrived: asyncio.Future[AuthorizationCodeResult],
) -> None:
    """The browser's redirect: the code and state from the query of its request line."""
    try:
        line = (await reader.readline()).decode("latin-1")
        target = line.split(" ")[1] if line.count(" ") >= 2 else ""
        query = parse_qs(urlsplit(target).query)
        code = query.get("code", [""])[0]
        if code and not arrived.done():
            state = query.get("state", [None])[0]
            iss = query.get("iss", [None])[0]
            arrived.set_result(AuthorizationCodeResult(code=code, state=state, iss=iss))
            body = b"agentfsm mcp-proxy is authorized; you can close this page.\n"
        else:
            body = b"agentfsm mcp-proxy: this is not an authorization redirect.\n"
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
    finally:
        writer.close()
