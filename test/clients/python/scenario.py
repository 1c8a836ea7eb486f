"""The client-test scenario with the Python MCP SDK client (mcp): list the
tools, a successful write, a refused write, a status read. Prints one JSON
object with what the client returned; clients_test.go judges it.

    python scenario.py URL PROTOCOL ORDER_ID   (tokens in TOKEN_ALICE, TOKEN_BOB)
"""

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def connect(stack: AsyncExitStack, url: str, protocol: str, token: str) -> Client:
    # 2026-07-28 pins the modern era (no fallback); 2025-11-25 is the
    # initialize handshake ("legacy"), which offers the SDK's latest
    # handshake version.
    mode = "legacy" if protocol == "2025-11-25" else protocol
    http = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
    transport = streamable_http_client(url, http_client=http)
    return await stack.enter_async_context(Client(transport, mode=mode))


def shown(result) -> dict:
    return {"isError": bool(result.is_error), "structuredContent": result.structured_content}


async def main(url: str, protocol: str, order_id: str) -> None:
    async with AsyncExitStack() as stack:
        alice = await connect(stack, url, protocol, os.environ["TOKEN_ALICE"])
        bob = await connect(stack, url, protocol, os.environ["TOKEN_BOB"])
        out: dict = {"protocol": alice.protocol_version}
        out["tools"] = [t.name for t in (await alice.list_tools()).tools]
        # A refusal that allows a retry (TEMPORARY_UNAVAILABLE, OVERLOADED on a
        # loaded machine) is retried as the result says: the same operation_id.
        for _ in range(10):
            write = await alice.call_tool(
                "request_risk_review",
                {"order_id": order_id, "reason": "client test (Python SDK)", "operation_id": f"py-{protocol}-{order_id}"},
            )
            if not (write.is_error and (write.structured_content or {}).get("retry_allowed") is True):
                break
            await asyncio.sleep(0.5)
        out["write"] = shown(write)
        await bob.list_tools()
        out["refused"] = shown(await bob.call_tool("request_risk_review", {"order_id": order_id, "reason": "not my order"}))
        review_id = (write.structured_content or {}).get("review_id")
        # As the result tells a client to: query until the review settles, and
        # again after a refusal that allows it.
        for _ in range(120):
            status = await alice.call_tool("get_risk_review_status", {"review_id": review_id})
            out["status"] = shown(status)
            body = status.structured_content or {}
            retry = status.is_error and body.get("retry_allowed") is True
            if not retry and body.get("status") not in ("PENDING", "UNKNOWN", "RETRYABLE"):
                break
            await asyncio.sleep(0.5)
        print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python scenario.py URL PROTOCOL ORDER_ID")
    asyncio.run(main(*sys.argv[1:]))
