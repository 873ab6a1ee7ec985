"""`agentfsm mcp-proxy --url ... --oauth`: a real MCP server behind MCP's OAuth 2.1
authorization, with a real authorization server on 127.0.0.1 (`mcp_oauth_server.py`: the
`mcp` package's server and auth routes), reached through the package's own OAuth client."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from agentfsm.integrations.mcp._oauth import FileTokenStorage
from tests.cli.test_mcp_proxy import ENV, Proxy, python, text
from tests.processes import free_port, wait_until_listening

SERVER = str(Path(__file__).with_name("mcp_oauth_server.py"))
CLIENT = "agentfsm-test-client"
REDIRECT = "http://127.0.0.1:1/callback"


class OAuthServer:
    """The server's process, URL and grant log; the token store the proxy is given."""

    def __init__(self, tmp_path: Path, seed: dict[str, Any] | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tmp_path / "grants.log"
        self.store = tmp_path / "oauth-store"
        self.args = [SERVER, str(self.log), str(self.port)]
        if seed is not None:
            seeded = tmp_path / "seed.json"
            seeded.write_text(json.dumps(seed), encoding="utf-8")
            self.args.append(str(seeded))

    @property
    def storage(self) -> FileTokenStorage:
        return FileTokenStorage(self.store, self.url)

    def grants(self) -> list[str]:
        if not self.log.exists():
            return []
        return self.log.read_text(encoding="utf-8").splitlines()

    def proxy(self, tmp_path: Path, *extra: str) -> Proxy:
        proxy = Proxy(tmp_path, {})
        proxy.args = [
            *("-m", "agentfsm", "mcp-proxy", "--policy", str(proxy.policy)),
            *("--trace", str(proxy.trace), "--url", self.url, *extra),
        ]
        return proxy


def _serve(tmp_path: Path, seed: dict[str, Any] | None) -> Iterator[OAuthServer]:
    server = OAuthServer(tmp_path, seed)
    with subprocess.Popen(
        [sys.executable, *server.args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    ) as process:
        try:
            wait_until_listening(server.port, process, "OAuth MCP server")
            yield server
        finally:
            process.kill()


def _seed(access_expires_in: int) -> dict[str, Any]:
    return {
        "client_id": CLIENT,
        "redirect_uri": REDIRECT,
        "access": "access-first-0123456789",
        "access_expires_at": time.time() + access_expires_in,
        "refresh": "refresh-first-0123456789",
    }


def _store(server: OAuthServer, seed: dict[str, Any], expires_in: int) -> None:
    """The tokens the server issued before, stored where the proxy reads them."""
    storage = server.storage

    async def go() -> None:
        await storage.set_client_info(
            OAuthClientInformationFull(
                client_id=CLIENT,
                redirect_uris=[REDIRECT],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
            )
        )
        await storage.set_tokens(
            OAuthToken(
                access_token=seed["access"], refresh_token=seed["refresh"], expires_in=expires_in
            )
        )

    asyncio.run(go())


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[OAuthServer]:
    """The server with a client and an access token issued an hour before it expires."""
    yield from _serve(tmp_path, _seed(3600))


@pytest.fixture
def expired(tmp_path: Path) -> Iterator[OAuthServer]:
    """The server with a client whose access token has expired (its refresh token has not)."""
    yield from _serve(tmp_path, _seed(-60))


@pytest.fixture
def unseeded(tmp_path: Path) -> Iterator[OAuthServer]:
    """The server knowing no client and no token."""
    yield from _serve(tmp_path, None)


def _trace_holds_none_of(proxy: Proxy, *secrets: str) -> None:
    trace = proxy.trace.read_text(encoding="utf-8")
    assert trace  # the session was traced
    for secret in secrets:
        assert secret not in trace


class TestStoredTokens:
    def test_a_stored_token_reaches_the_server(self, tmp_path: Path, fresh: OAuthServer) -> None:
        """With a stored, unexpired token the call passes, nothing is refreshed, and the trace
        holds no token."""
        seed = _seed(3600)
        _store(fresh, seed, 3600)
        proxy = fresh.proxy(tmp_path, "--oauth", "--oauth-store", str(fresh.store))
        (result,) = proxy.call(("read_row", {"key": "a"}))
        assert not result.is_error, text(result) + proxy.stderr.read_text()
        assert text(result) == "row a"
        assert fresh.grants() == ['call read_row:{"key": "a"}']
        _trace_holds_none_of(proxy, seed["access"], seed["refresh"])

    def test_an_expired_token_is_refreshed_and_stored(
        self, tmp_path: Path, expired: OAuthServer
    ) -> None:
        """An expired access token is refreshed at the token endpoint before the call, the new
        tokens are stored 0600 and none of them reaches the trace."""
        seed = _seed(-60)
        _store(expired, seed, -60)
        proxy = expired.proxy(tmp_path, "--oauth", "--oauth-store", str(expired.store))
        (result,) = proxy.call(("read_row", {"key": "a"}))
        assert not result.is_error, text(result) + proxy.stderr.read_text()
        refreshes = [g for g in expired.grants() if g.startswith("refresh ")]
        assert len(refreshes) == 1
        new_access = refreshes[0].rsplit(" ", 1)[1]
        assert refreshes[0].startswith(f"refresh {seed['refresh']} -> ")
        assert expired.grants()[-1] == 'call read_row:{"key": "a"}'
        kept = json.loads(expired.storage.path.read_text(encoding="utf-8"))
        assert kept["tokens"]["access_token"] == new_access
        assert stat.S_IMODE(os.stat(expired.storage.path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(expired.store).st_mode) == 0o700
        new_refresh = kept["tokens"]["refresh_token"]
        _trace_holds_none_of(proxy, seed["access"], seed["refresh"], new_access, new_refresh)


class TestLogin:
    def test_no_stored_token_exits_2_saying_how_to_log_in(
        self, tmp_path: Path, unseeded: OAuthServer
    ) -> None:
        """--oauth with nothing stored for the server starts nothing: exit 2, naming the
        --oauth-login step with the same store."""
        (tmp_path / "policy.json").write_text("{}", encoding="utf-8")
        done = python(
            *("-m", "agentfsm", "mcp-proxy", "--policy", "policy.json", "--url", unseeded.url),
            *("--oauth", "--oauth-store", str(unseeded.store)),
            input="",
            cwd=tmp_path,
        )
        assert done.returncode == 2, done.stderr
        assert f"--url {unseeded.url} --oauth-store {unseeded.store} --oauth-login" in done.stderr
        assert unseeded.grants() == []

    def test_login_authorizes_once_and_the_proxy_then_runs(
        self, tmp_path: Path, unseeded: OAuthServer
    ) -> None:
        """--oauth-login registers the client, prints the authorization URL, takes the
        browser's redirect on 127.0.0.1 and stores the tokens; the proxy then reaches the
        server with them."""
        login = subprocess.Popen(
            [
                sys.executable,
                *("-m", "agentfsm", "mcp-proxy", "--policy", "unused.json"),
                *("--url", unseeded.url, "--oauth-store", str(unseeded.store), "--oauth-login"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ENV,
            cwd=tmp_path,
            text=True,
        )
        with login:
            assert login.stderr is not None
            line = login.stderr.readline()
            assert "open this URL in a browser" in line, line
            # The browser: follow the authorization server's redirect back to the proxy.
            authorize = line.rsplit(" ", 1)[1].strip()
            answer = httpx2.get(authorize, follow_redirects=True, timeout=30)
            assert answer.status_code == 200
            assert "authorized" in answer.text
            assert login.wait(60) == 0, login.stderr.read()
        assert unseeded.grants()[:3] == ["register", "authorize", "code"]
        assert unseeded.storage.stored()
        proxy = unseeded.proxy(tmp_path, "--oauth", "--oauth-store", str(unseeded.store))
        (result,) = proxy.call(("read_row", {"key": "b"}))
        assert text(result) == "row b"
        kept = json.loads(unseeded.storage.path.read_text(encoding="utf-8"))
        _trace_holds_none_of(proxy, kept["tokens"]["access_token"], kept["tokens"]["refresh_token"])
