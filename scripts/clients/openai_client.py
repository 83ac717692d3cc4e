"""The official openai package against ragscope's OpenAI-compatible /v1.

    openai_client.py BASE_URL KEY     # e.g. http://127.0.0.1:3210/v1

Expects a knowledge base `shop` holding the FAQ table of
crates/ragscope/tests/clients.rs. Lists the models, asks without and with
streaming, continues a chat, and checks the errors the package raises;
any mismatch raises, so the exit status is the verdict. Prints one `ok:`
line per check.
"""

import sys

import openai
from openai import OpenAI


def main(base_url, key):
    client = OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=120)

    models = client.models.list()
    assert [m.id for m in models.data] == ["shop"], models
    assert models.data[0].owned_by == "ragscope", models
    print("ok: models.list")

    question = [{"role": "user", "content": "怎么申请退款？"}]
    c = client.chat.completions.create(model="shop", messages=question, temperature=0)
    content = c.choices[0].message.content
    assert c.choices[0].finish_reason == "stop", c
    assert "[1]" in content, content
    ext = c.model_extra["ragscope"]
    assert ext["kb_miss"] is False, ext
    assert ext["sources"][0]["title"] == "怎么申请退款？", ext
    assert c.id == "chatcmpl-" + ext["log_id"], (c.id, ext)
    print("ok: chat.completions (non-streaming)")

    stream = client.chat.completions.create(
        model="shop", messages=question, stream=True, stream_options={"include_usage": True}
    )
    pieces, last_ext, finish, usage = [], None, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
        if chunk.model_extra and "ragscope" in chunk.model_extra:
            last_ext = chunk.model_extra["ragscope"]
    assert len(pieces) >= 2, pieces
    assert "".join(pieces) == content, ("".join(pieces), content)
    assert finish == "stop", finish
    assert last_ext is not None and last_ext["kb_miss"] is False, last_ext
    assert usage is not None, "no usage chunk"
    print(f"ok: chat.completions (streaming, {len(pieces)} content chunks)")

    first = [{"role": "user", "content": "你们的营业时间是几点到几点？"}]
    a1 = client.chat.completions.create(model="shop", messages=first)
    follow = first + [
        {"role": "assistant", "content": a1.choices[0].message.content},
        {"role": "user", "content": "那周末呢？"},
    ]
    a2 = client.chat.completions.create(model="shop", messages=follow)
    assert a2.model_extra["ragscope"]["rewrite_method"] == "add_qualifier", a2.model_extra
    print("ok: a follow-up is rewritten")

    try:
        client.chat.completions.create(model="nope", messages=question)
        raise AssertionError("an unknown model answered")
    except openai.NotFoundError as e:
        assert e.code == "model_not_found", e.body
        print("ok: unknown model is NotFoundError")

    bad = OpenAI(base_url=base_url, api_key="sk-not-a-ragscope-key", max_retries=0)
    try:
        bad.models.list()
        raise AssertionError("a bad key was accepted")
    except openai.AuthenticationError as e:
        assert e.body["type"] == "authentication_error", e.body
        print("ok: bad key is AuthenticationError")
    print("openai client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
