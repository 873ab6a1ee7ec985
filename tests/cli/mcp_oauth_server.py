"""An MCP server behind MCP's OAuth 2.1 authorization, with its own authorization server,
for the `agentfsm mcp-proxy --oauth` tests.

Run as `python mcp_oauth_server.py LOG PORT [SEED]`: the `mcp` package's `MCPServer` on
127.0.0.1:PORT/mcp, requiring a bearer token, and the package's authorization server routes
(metadata, dynamic client registration, `/authorize`, `/token`) over an in-memory provider
that approves every authorization at once (the "browser" is whoever follows the redirect).
SEED (a JSON file) gives it a client and tokens issued before it started: `client_id`,
`redirect_uri`, `access`, `access_expires_at` (epoch seconds), `refresh`. Every grant and
tool call is appended to LOG (`register`, `authorize`, `code`, `refresh <old> -> <new>`,
`call read_row:<args>`), so a test reads what happened from another process.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import ToolAnnotations

LOG = Path(sys.argv[1])
PORT = int(sys.argv[2])
SEED: dict[str, Any] = json.loads(Path(sys.argv[3]).read_text()) if len(sys.argv) > 3 else {}
LIFETIME = 3600


def log(line: str) -> None:
    with LOG.open("a", encoding="utf-8") as out:
        out.write(line + "\n")


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """An authorization server that keeps everything in memory and approves every request
    (the identity-assertion grant it leaves to the protocol's default: refused)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        if SEED:
            client = SEED["client_id"]
            self.clients[client] = OAuthClientInformationFull(
                client_id=client,
                redirect_uris=[SEED["redirect_uri"]],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
            )
            self.access[SEED["access"]] = AccessToken(
                token=SEED["access"],
                client_id=client,
                scopes=[],
                expires_at=int(SEED["access_expires_at"]),
            )
            self.refresh[SEED["refresh"]] = RefreshToken(
                token=SEED["refresh"], client_id=client, scopes=[]
            )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        log("register")

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        log("authorize")
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = self.codes.get(authorization_code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        log("code")
        return self._issue(authorization_code.client_id)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        issued = self._issue(refresh_token.client_id)
        log(f"refresh {refresh_token.token} -> {issued.access_token}")
        return issued

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires = int(time.time()) + LIFETIME
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=[], expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=[])
        return OAuthToken(access_token=access, expires_in=LIFETIME, refresh_token=refresh)


def main() -> None:
    base = f"http://127.0.0.1:{PORT}"
    server = MCPServer(
        "oauth-server",
        auth_server_provider=Provider(),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=False,
        ),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_row(key: str) -> str:
        """Read a row by key."""
        log(f"call read_row:{json.dumps({'key': key})}")
        return f"row {key}"

    server.run("streamable-http", host="127.0.0.1", port=PORT)


if __name__ == "__main__":
    main()
