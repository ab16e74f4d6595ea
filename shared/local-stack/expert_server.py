"""An MCP "expert" for the tests: the official Python SDK's server over Streamable HTTP on loopback.

Usage: expert_server.py PORT [--json] [--stateless] [--page-size N] [--require-header NAME=VALUE]
                         [--allow-host NAME]... [--deed-prompts] [--revision 2025-06-18] [--record FILE]
                         [--cache-ttl-ms N] [--cache-scope public|private] [--modern-tools]

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
* The SDK serves both eras by default: 2026-07-28 (stateless single POSTs, `server/discover`) and the
  `initialize` revisions. `--revision 2025-06-18` makes it a server of that revision only, as one
  written before 2026 answers: a request naming a newer `MCP-Protocol-Version` gets 400, and an
  `initialize` asking for a newer version is answered with 2025-06-18.
* `--record FILE` appends one JSON line per request: its method, its routing and session headers and
  whether its params carried the 2026 `_meta` envelope, so a test can see what reached the server.
* `--cache-ttl-ms N` and `--cache-scope` put the 2026 cache hints (`ttlMs`, `cacheScope`) on
  `tools/list` and `prompts/list` (the SDK's default is 0 ms, private: never reused).
* `--modern-tools` adds `book_trip`, which asks the user for a seat the 2026 way (an input-required
  result with an elicitation, answered by the client's retry with `inputResponses` and the echoed
  `requestState`), and `long_report`, which runs as a task (the `io.modelcontextprotocol/tasks`
  extension, SEP-2663) for a client that declared the extension: `tasks/get` polls it and
  `tasks/cancel` stops it.

Needs `pip install mcp` (written against mcp 2.x, whose `MCPServer` replaced `FastMCP`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import uuid
from typing import Annotated, Any

import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ImageContent,
    InputRequiredResult,
    RequestParams,
    TextContent,
)
from pydantic import BaseModel, Field

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--require-header", default=None)
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deed-prompts", action="store_true")
    parser.add_argument("--revision", choices=["2025-06-18"], default=None)
    parser.add_argument("--record", default=None)
    parser.add_argument("--cache-ttl-ms", type=int, default=None)
    parser.add_argument("--cache-scope", choices=["public", "private"], default="private")
    parser.add_argument("--modern-tools", action="store_true")
    return parser.parse_args()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Tasks(Extension):
    """The tasks extension (SEP-2663) for `long_report`: a client that declared the extension in its
    request's capabilities gets a task handle at once; `tasks/get` answers the task's state, with the
    tool's result inlined once it completed; `tasks/cancel` stops it."""

    identifier = TASKS_EXTENSION
    TASK_TOOLS = {"long_report"}

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
        ]

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        capabilities = ctx.session.client_capabilities
        declared = (capabilities.extensions or {}) if capabilities else {}
        if params.name not in self.TASK_TOOLS or TASKS_EXTENSION not in declared:
            return await call_next(ctx)
        task_id = str(uuid.uuid4())
        state: dict[str, Any] = {"status": "working", "createdAt": now(), "lastUpdatedAt": now()}
        self.tasks[task_id] = state

        async def run() -> None:
            try:
                result = await call_next(ctx)
                data = result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result
                data.pop("_meta", None)
                data.pop("resultType", None)
                state.update(status="completed", result=data, lastUpdatedAt=now())
            except asyncio.CancelledError:
                state.update(status="cancelled", lastUpdatedAt=now())
            except Exception as error:  # the task fails with the error, as the call would have
                state.update(status="failed", error={"code": -32603, "message": str(error)}, lastUpdatedAt=now())

        state["runner"] = asyncio.get_running_loop().create_task(run())
        return {"resultType": "task", "taskId": task_id, **self.shape(state, with_payload=False)}

    def shape(self, state: dict[str, Any], with_payload: bool = True) -> dict[str, Any]:
        shaped = {key: state[key] for key in ("status", "createdAt", "lastUpdatedAt")}
        shaped.update(ttlMs=60_000, pollIntervalMs=100)
        if with_payload:
            shaped.update({key: state[key] for key in ("result", "error") if key in state})
        return shaped

    async def get(self, ctx: Any, params: Any) -> dict[str, Any]:
        state = self.tasks.get(params.task_id)
        if state is None:
            raise MCPError(code=-32602, message=f"no task {params.task_id!r}")
        return {"resultType": "complete", "taskId": params.task_id, **self.shape(state)}

    async def cancel(self, ctx: Any, params: Any) -> dict[str, Any]:
        state = self.tasks.get(params.task_id)
        if state is None:
            raise MCPError(code=-32602, message=f"no task {params.task_id!r}")
        if state["status"] == "working":
            state["runner"].cancel()
            state.update(status="cancelled", lastUpdatedAt=now())
        return {"resultType": "complete"}


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


ARGS = parse_args()
hints = None
if ARGS.cache_ttl_ms is not None:
    hint = CacheHint(ttl_ms=ARGS.cache_ttl_ms, scope=ARGS.cache_scope)
    hints = {"tools/list": hint, "prompts/list": hint}
server = MCPServer(
    "expert-fixture",
    instructions="A test expert for contracts and arithmetic.",
    cache_hints=hints,
    extensions=[Tasks()] if ARGS.modern_tools else None,
)


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


def add_modern_tools() -> None:
    """Registers the tools of `--modern-tools`."""

    @server.tool(description="Books a trip; asks the traveller for a seat.")
    def book_trip(destination: str, ctx: Context) -> InputRequiredResult | str:
        answer = (ctx.input_responses or {}).get("seat")
        if answer is None:
            schema = {
                "type": "object",
                "properties": {
                    "seat": {"type": "string", "enum": ["window", "aisle"], "description": "Where to sit."}
                },
                "required": ["seat"],
            }
            ask = ElicitRequest(
                method="elicitation/create",
                params=ElicitRequestFormParams(message=f"Which seat for the trip to {destination}?", requested_schema=schema),
            )
            return InputRequiredResult(input_requests={"seat": ask}, request_state=f"trip:{destination}")
        answer = answer.model_dump(by_alias=True, exclude_none=True) if isinstance(answer, BaseModel) else answer
        if ctx.request_state != f"trip:{destination}":
            raise ToolError(f"the request state {ctx.request_state!r} does not belong to this trip")
        if answer.get("action") != "accept":
            return f"The trip to {destination} was not booked: the traveller chose {answer.get('action')}."
        return f"Booked the trip to {destination} with a {answer['content']['seat']} seat."

    @server.tool(description="Writes a long report; runs as a task.")
    async def long_report(topic: str, seconds: float = 2.0) -> str:
        await asyncio.sleep(seconds)
        return f"The report on {topic} is ready."


class Record:
    """ASGI wrapper that appends each request's method, headers and `_meta` envelope to a file."""

    def __init__(self, app: Any, path: str) -> None:
        self.app, self.path = app, path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body, receive = await buffered(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        params = message.get("params") if isinstance(message, dict) else None
        line = {
            "http": scope["method"],
            "method": message.get("method") if isinstance(message, dict) else None,
            "version": headers.get("mcp-protocol-version"),
            "session": headers.get("mcp-session-id"),
            "mcp_method": headers.get("mcp-method"),
            "mcp_name": headers.get("mcp-name"),
            "meta": isinstance(params, dict) and "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {}),
        }
        with open(self.path, "a") as out:
            out.write(json.dumps(line) + "\n")
        await self.app(scope, receive, send)


class HandshakeOnly:
    """ASGI wrapper that makes the server one of `--revision` only, as a server written before 2026."""

    NEWER = {"2025-11-25", "2026-07-28"}

    def __init__(self, app: Any, revision: str) -> None:
        self.app, self.revision = app, revision

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode()
        if version and version != self.revision and version != "2025-03-26":
            await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Unsupported protocol version"}}
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        body, receive = await buffered(receive)
        try:
            message = json.loads(body) if body else None
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "initialize":
            params = message.get("params") or {}
            if params.get("protocolVersion") in self.NEWER:
                params["protocolVersion"] = self.revision
                body = json.dumps(message).encode()
                receive = replay(body)
                scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"content-length"]}
        await self.app(scope, receive, send)


async def buffered(receive: Any) -> tuple[bytes, Any]:
    """The whole request body, and a `receive` that hands it out again."""
    chunks = []
    while True:
        event = await receive()
        if event["type"] != "http.request":
            break
        chunks.append(event.get("body", b""))
        if not event.get("more_body"):
            break
    body = b"".join(chunks)
    return body, replay(body, receive)


def replay(body: bytes, rest: Any = None) -> Any:
    sent = False

    async def receive() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if rest is not None:
            return await rest()
        await asyncio.Event().wait()

    return receive


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
    args = ARGS
    if args.deed_prompts:
        add_deed_prompts()
    if args.modern_tools:
        add_modern_tools()

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
    if args.revision:
        app = HandshakeOnly(app, args.revision)
    if args.record:
        app = Record(app, args.record)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
