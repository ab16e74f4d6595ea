"""An MCP "expert" for the tests: the official Python SDK's server over Streamable HTTP on loopback.

Usage: expert_server.py PORT [--json] [--stateless] [--page-size N] [--require-header NAME=VALUE]
                         [--allow-host NAME]... [--deed-prompts]

* `--json` answers with `application/json` instead of SSE streams (the SDK's `json_response`).
* `--stateless` serves without sessions (no `Mcp-Session-Id`).
* `--page-size N` paginates `prompts/list` and `tools/list` with an opaque `nextCursor`, since the
  SDK's high-level server returns every item in one page.
* `--require-header` answers 401 unless the request carries that header, so a test can prove the
  configured (secret) headers reach the server.
* `--allow-host NAME` accepts `Host: NAME:PORT` besides the loopback names, which the SDK's DNS
  rebinding protection otherwise refuses (421): tenant experts may not use loopback addresses, so a
  test reaches this server under the machine's host name.
* `--deed-prompts` adds the prompts the planner's prompt-argument tests need: `draft_deed` (a required
  argument), `notarize` (refuses a deed not on record with invalid params) and `deed_register` (fails).
  They are left out of the default listing, which other tests count.

Needs `pip install mcp` (written against mcp 2.x, whose `MCPServer` replaced `FastMCP`).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Annotated, Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent, TextContent
from pydantic import BaseModel, Field

server = MCPServer("expert-fixture", instructions="A test expert for contracts and arithmetic.")


@server.prompt(description="Draft a contract between two parties.")
def draft_contract(party_a: str, party_b: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Draft a sale contract between {party_a} (seller) and {party_b} (buyer)."},
        {"role": "assistant", "content": f"I will draft the contract for {party_a} and {party_b}."},
    ]


@server.prompt(description="Review a clause.")
def review_clause(clause: str) -> str:
    return f"Review this clause for risks: {clause}"


# Filler prompts so that a small page size needs several pages.
def _filler(n: int) -> Any:
    def render() -> str:
        return f"Filler prompt number {n}."

    return render


for _i in range(1, 6):
    server.prompt(name=f"filler_{_i}", description=f"Filler prompt {_i}.")(_filler(_i))


DEEDS_ON_RECORD = {"D-17"}


def add_deed_prompts() -> None:
    """Registers the prompts of `--deed-prompts`."""

    @server.prompt(description="Draft a notarial deed of a given type.")
    def draft_deed(deed_type: Annotated[str, Field(description="The kind of deed: sale, gift, will.")]) -> str:
        return f"Draft a notarial deed of type: {deed_type}."

    @server.prompt(description="Notarize a deed on record.")
    def notarize(deed: Annotated[str, Field(description="The deed's number on record.")] = "") -> str:
        # The spec's code for arguments a prompt cannot take: the SDK passes an MCPError through.
        if deed not in DEEDS_ON_RECORD:
            raise MCPError(code=-32602, message=f"the deed {deed!r} is not on record")
        return f"Notarize the deed {deed}."

    @server.prompt(description="Read the deed register.")
    def deed_register() -> str:
        # Any other exception: the SDK answers with a generic error (code 0).
        raise RuntimeError("the register is offline")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails.")
def fail() -> str:
    # A ToolError's message reaches the client; other exceptions are masked by the SDK.
    raise ToolError("this tool always fails")


@server.tool(description="Sleeps for a while before answering.")
async def slow(seconds: float = 5.0) -> str:
    await asyncio.sleep(seconds)
    return "finally"


@server.tool(description="Returns text and an image.")
def picture() -> list[Any]:
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png"),
    ]


class Paginate:
    """Middleware that pages `prompts/list` and `tools/list`; the cursor is the next start index."""

    LISTS = {"prompts/list": "prompts", "tools/list": "tools"}

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        key = self.LISTS.get(ctx.method)
        if key is None:
            return result
        data = result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else dict(result)
        cursor = (ctx.params or {}).get("cursor")
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            raise MCPError(code=-32602, message=f"invalid cursor {cursor!r}") from None
        items = data[key]
        data[key] = items[start : start + self.page_size]
        data.pop("nextCursor", None)
        if start + self.page_size < len(items):
            data["nextCursor"] = str(start + self.page_size)
        return data


class RequireHeader:
    """ASGI wrapper answering 401 unless a header carries the expected value."""

    def __init__(self, app: Any, name: str, value: str) -> None:
        self.app, self.name, self.value = app, name.lower().encode(), value.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(self.name) != self.value:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing credentials"})
            return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--require-header", default=None)
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deed-prompts", action="store_true")
    args = parser.parse_args()

    if args.deed_prompts:
        add_deed_prompts()

    if args.page_size > 0:
        server.middleware.append(Paginate(args.page_size))
    security = None
    if args.allow_host:
        hosts = ["127.0.0.1", "localhost", "[::1]", *args.allow_host]
        security = TransportSecuritySettings(
            allowed_hosts=[f"{host}:*" for host in hosts],
            allowed_origins=[f"http://{host}:*" for host in hosts],
        )
    app: Any = server.streamable_http_app(
        json_response=args.json, stateless_http=args.stateless, host="127.0.0.1", transport_security=security
    )
    if args.require_header:
        name, _, value = args.require_header.partition("=")
        app = RequireHeader(app, name, value)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
