"""One step of an A2A conversation, driven by the a2a-sdk client (tests/it/a2a.rs runs it).

Usage: a2a_client.py BASE_URL COMMAND [ARG]; the bearer token, if any, is in A2A_TOKEN, and
A2A_PROTOCOL=0.3 makes the client speak A2A 0.3 instead of 1.0.
Commands:
  card                 the agent card, as the SDK's resolver reads it
  send JSON            SendMessage, blocking: {"text", "message_id", "context_id"?, "return_immediately"?}
  stream JSON          SendStreamingMessage: the same; every stream response, in order
  decide JSON          SendMessage of decisions: {"task_id", "context_id", "message_id", "decisions"}
  get TASK_ID          GetTask
  cancel TASK_ID       CancelTask
  raw BODY             a POST of BODY as it is to the card's JSON-RPC URL: {"status", "body"}
Prints one JSON object: the result as ProtoJSON, or {"error": {"type", "message", "code"?}}.
"""

import asyncio
import json
import os
import sys

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
)
from a2a.utils.errors import A2AError, JSON_RPC_ERROR_CODE_MAP


def as_json(proto):
    return json_format.MessageToDict(proto)


def http_client():
    token = os.environ.get("A2A_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(headers=headers, timeout=120)


async def card(base):
    async with http_client() as http:
        return as_json(await A2ACardResolver(http, base).get_agent_card())


async def client(base, http, streaming):
    resolved = await A2ACardResolver(http, base).get_agent_card()
    # A2A_PROTOCOL=0.3 keeps only the card's 0.3 interface: the SDK then speaks 0.3 (its compat
    # transport: `message/send`..., whose answers it validates against 0.3's types).
    version = os.environ.get("A2A_PROTOCOL")
    if version:
        kept = [i for i in resolved.supported_interfaces if i.protocol_version == version]
        del resolved.supported_interfaces[:]
        resolved.supported_interfaces.extend(kept)
    return ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(resolved)


def message(args, parts):
    return Message(
        message_id=args["message_id"],
        role=Role.ROLE_USER,
        parts=parts,
        context_id=args.get("context_id", ""),
        task_id=args.get("task_id", ""),
    )


async def send(base, args, streaming, parts):
    request = SendMessageRequest(
        message=message(args, parts),
        configuration=SendMessageConfiguration(return_immediately=args.get("return_immediately", False)),
    )
    async with http_client() as http:
        agent = await client(base, http, streaming)
        return {"responses": [as_json(response) async for response in agent.send_message(request)]}


async def get(base, task_id):
    async with http_client() as http:
        return as_json(await (await client(base, http, False)).get_task(GetTaskRequest(id=task_id)))


async def cancel(base, task_id):
    async with http_client() as http:
        return as_json(await (await client(base, http, False)).cancel_task(CancelTaskRequest(id=task_id)))


async def raw(base, body):
    async with httpx.AsyncClient() as anonymous:
        url = (await A2ACardResolver(anonymous, base).get_agent_card()).supported_interfaces[0].url
    async with http_client() as http:
        response = await http.post(url, content=body, headers={"content-type": "application/json"})
        try:
            answer = response.json()
        except ValueError:
            answer = response.text
        return {"status": response.status_code, "body": answer}


async def main():
    base, command = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else None
    try:
        if command == "card":
            result = await card(base)
        elif command in ("send", "stream"):
            args = json.loads(arg)
            result = await send(base, args, command == "stream", [new_text_part(args["text"])])
        elif command == "decide":
            args = json.loads(arg)
            result = await send(base, args, False, [new_data_part({"decisions": args["decisions"]})])
        elif command == "get":
            result = await get(base, arg)
        elif command == "cancel":
            result = await cancel(base, arg)
        elif command == "raw":
            result = await raw(base, arg)
        else:
            raise SystemExit(f"unknown command {command}")
    except A2AError as err:
        # The SDK's own errors (A2AClientError: HTTP, transport) have no JSON-RPC code.
        result = {"error": {"type": type(err).__name__, "message": err.message,
                            "code": JSON_RPC_ERROR_CODE_MAP.get(type(err))}}
    print(json.dumps(result))


asyncio.run(main())
