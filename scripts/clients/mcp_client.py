"""The official MCP Python SDK against ragscope, over either transport.

    mcp_client.py stdio RAGSCOPE_BINARY ARG...   # starts `ragscope ARG... mcp`
    mcp_client.py http URL KEY                     # `ragscope serve`'s /mcp

Expects a knowledge base `shop` holding the FAQ table of
crates/ragscope/tests/clients.rs. Connects as the SDK does by default
(probing for the newest revision, then the initialize handshake), lists the
tools and calls each one; any mismatch raises, so the exit status is the
verdict. Prints one `ok:` line per check.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOOLS = ["list_knowledge_bases", "search", "ask", "faq_lookup"]


def text_of(result):
    assert len(result.content) == 1, result
    item = result.content[0]
    assert item.type == "text", item
    return item.text


async def exercise(client):
    assert client.protocol_version in ("2025-11-25", "2025-06-18"), client.protocol_version
    assert client.server_info.name == "ragscope", client.server_info
    print(f"ok: connected, protocol {client.protocol_version}")

    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == TOOLS, names
    for t in listed.tools:
        assert t.input_schema["type"] == "object", t
    print("ok: tools/list", names)

    r = await client.call_tool("list_knowledge_bases", {})
    assert not r.is_error, r
    kbs = json.loads(text_of(r))
    assert [k["name"] for k in kbs] == ["shop"], kbs
    print("ok: list_knowledge_bases")

    r = await client.call_tool("search", {"kb": "shop", "query": "怎么退款", "top_k": 3})
    assert not r.is_error, r
    found = json.loads(text_of(r))
    hit = found["hits"][0]
    assert hit["title"] == "怎么申请退款？", found
    assert hit["source"] == "https://shop.example/help/refund", hit
    assert 0 < hit["score"] <= 1, hit
    print("ok: search")

    r = await client.call_tool("ask", {"kb": "shop", "question": "怎么申请退款？", "conversation_id": "sdk-chat"})
    assert not r.is_error, r
    answer = json.loads(text_of(r))
    assert answer["kb_miss"] is False, answer
    assert "[1]" in answer["answer"], answer
    assert answer["sources"][0]["title"] == "怎么申请退款？", answer
    assert answer["log_id"], answer
    print("ok: ask")

    r = await client.call_tool("faq_lookup", {"kb": "shop", "query": "怎么申请退款"})
    assert not r.is_error, r
    text = text_of(r)
    assert text.startswith("Q: 怎么申请退款？\nA: 在订单页点击申请退款"), text
    assert "Source: https://shop.example/help/refund" in text, text
    r = await client.call_tool("faq_lookup", {"kb": "shop", "query": "披萨"})
    assert text_of(r) == "No relevant FAQs found for: 披萨", r
    print("ok: faq_lookup")

    r = await client.call_tool("search", {"kb": "nope", "query": "退款"})
    assert r.is_error, r
    assert json.loads(text_of(r))["error"]["code"] == "unknown_kb", r
    print("ok: a tool error is a result")


async def main(argv):
    if argv[0] == "stdio":
        params = StdioServerParameters(command=argv[1], args=[*argv[2:], "mcp"])
        async with Client(params) as client:
            await exercise(client)
    elif argv[0] == "http":
        url, key = argv[1], argv[2]
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
        async with http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await exercise(client)
        # Without the key the server refuses.
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            failed = False
            try:
                async with Client(streamable_http_client(url, http_client=anonymous)) as client:
                    await client.list_tools()
            except Exception as e:  # the SDK's error for a 401
                failed = True
                print("ok: refused without a key:", type(e).__name__)
            assert failed, "the server answered without a key"
    else:
        raise SystemExit(f"unknown transport {argv[0]!r}")
    print("mcp client: all checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
