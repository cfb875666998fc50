"""A scripted OpenAI-compatible server on loopback, for tests where what matters is what a real
``ChatOpenAI`` (or ``OpenAIEmbeddings``) sends and gets over HTTP.

It is a real HTTP server (``http.server`` on 127.0.0.1, a free port) that records every request and
answers ``/chat/completions`` (plain and streamed as server-sent events) and ``/embeddings``. Only the
model is scripted: by default the chat answers are the offline model's rules applied to the request's
messages, so a conversation pages out, compacts and pages in as it would with an LLM, and the
embeddings are a small deterministic model of hashed character trigrams (a second, real embedding).

    with ScriptedOpenAI() as api:
        model = api.chat_model()            # ChatOpenAI pointed at the server
        ...
        api.chat_requests[-1]["messages"]   # what the model was sent
"""

from __future__ import annotations

import hashlib
import http.server
import itertools
import json
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

API_KEY = "sk-scripted"
CHAT_MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"
#: Dimensions of the default scripted embedding.
EMBED_DIMS = 64

Reply = Callable[[dict[str, Any]], dict[str, Any]]
"""A chat answer: the request body -> an assistant message (``{"content": ...}``, ``{"tool_calls": [...]}``)."""
Embed = Callable[[list[str]], list[list[float]]]


@dataclass
class Request:
    """One request the server got: its path (``/v1/chat/completions``), parsed JSON body and headers."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


class ScriptedError(Exception):
    """Raise from a ``reply`` to make the server answer with ``status`` and an OpenAI error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    """Chat-completions messages as LangChain messages (text content only)."""
    out: list[BaseMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if m["role"] in ("system", "developer"):
            out.append(SystemMessage(content))
        elif m["role"] == "user":
            out.append(HumanMessage(content))
        elif m["role"] == "assistant":
            calls = [{"name": tc["function"]["name"], "args": json.loads(tc["function"]["arguments"] or "{}"),
                      "id": tc["id"]} for tc in m.get("tool_calls") or []]
            names.update({c["id"]: c["name"] for c in calls})
            out.append(AIMessage(content, tool_calls=calls))
        else:
            out.append(ToolMessage(content, tool_call_id=m["tool_call_id"], name=names.get(m["tool_call_id"])))
    return out


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest value a JSON schema accepts (required fields only, empty lists and strings, zeros)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return minimal_instance(schema["anyOf"][0], defs)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal_instance(props.get(k, {}), defs) for k in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False, "null": None}.get(kind or "", None)


def structured_reply(body: dict[str, Any]) -> dict[str, Any] | None:
    """For a structured-output request (``response_format`` with a JSON schema), an answer that says
    nothing: the schema's smallest instance, as JSON content. None for any other request."""
    spec = (body.get("response_format") or {}).get("json_schema")
    if not spec:
        return None
    return {"content": json.dumps(minimal_instance(spec.get("schema") or {}))}


def offline_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The offline model's answer to the request, as an assistant message; a structured-output request
    (a judge's, say) gets the smallest answer its schema accepts (``structured_reply``)."""
    from pagefault import OfflineChatModel

    structured = structured_reply(body)
    if structured is not None:
        return structured

    reply = OfflineChatModel().invoke(to_langchain(body["messages"]), tools=body.get("tools") or [])
    message: dict[str, Any] = {"content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [{"id": tc["id"] or f"call_{n}", "type": "function",
                                  "function": {"name": tc["name"], "arguments": json.dumps(tc["args"])}}
                                 for n, tc in enumerate(reply.tool_calls)]
    return message


def trigram_embedding(texts: list[str], dims: int = EMBED_DIMS) -> list[list[float]]:
    """Unit vectors of hashed character trigrams of each lower-cased text: similar words, near vectors."""
    out = []
    for text in texts:
        v = [0.0] * dims
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            h = hashlib.blake2b(padded[i:i + 3].encode("utf-8", "surrogatepass"), digest_size=4).digest()
            n = int.from_bytes(h, "little")
            v[n % dims] += 1.0 if n & 0x80000000 else -1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def _words(text: str) -> int:
    return max(1, len(text.split()))


class ScriptedOpenAI:
    """The server (see the module docstring): ``reply`` scripts the chat answers, ``embed`` the vectors."""

    def __init__(self, reply: Reply | None = None, embed: Embed | None = None) -> None:
        self.reply = reply or offline_reply
        self.embed = embed or trigram_embedding
        self.requests: list[Request] = []
        self._ids = itertools.count()
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.requests.append(Request(self.path, body, dict(self.headers)))
                try:
                    if self.path.endswith("/chat/completions"):
                        self._chat(body)
                    elif self.path.endswith("/embeddings"):
                        self._json(200, server._embeddings(body))
                    else:
                        self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                except ScriptedError as e:
                    self._json(e.status, {"error": {"message": str(e), "type": "server_error"}})

            def _chat(self, body: dict[str, Any]) -> None:
                message = server.reply(body)
                if body.get("stream"):
                    self._stream(body, message)
                else:
                    self._json(200, server._completion(body, message))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in server._chunks(body, message):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- what the tests read -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL a client is given (``.../v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies sent to ``/chat/completions``, in order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """The bodies sent to ``/embeddings``, in order."""
        return [r.body for r in self.requests if r.path.endswith("/embeddings")]

    def chat_model(self, **kwargs: Any) -> Any:
        """A real ``ChatOpenAI`` pointed at this server (no retries: a scripted failure stays one)."""
        from langchain_openai import ChatOpenAI

        options: dict[str, Any] = {"model": CHAT_MODEL, "api_key": API_KEY, "base_url": self.url, "max_retries": 0}
        return ChatOpenAI(**{**options, **kwargs})

    def embeddings(self, **kwargs: Any) -> Any:
        """A real ``OpenAIEmbeddings`` pointed at this server."""
        from langchain_openai import OpenAIEmbeddings

        options: dict[str, Any] = {"model": EMBEDDING_MODEL, "api_key": API_KEY, "base_url": self.url,
                                   "check_embedding_ctx_length": False, "max_retries": 0}
        return OpenAIEmbeddings(**{**options, **kwargs})

    # --- the answers ---------------------------------------------------------------------------------

    def _usage(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, int]:
        prompt = sum(_words(json.dumps(m.get("content") or "")) for m in body.get("messages") or [])
        completion = _words(message.get("content") or "") + len(message.get("tool_calls") or [])
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
        calls = message.get("tool_calls")
        return {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": 1_700_000_000,
            "model": body.get("model", CHAT_MODEL),
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop",
                         "message": {"role": "assistant", "content": message.get("content"),
                                     **({"tool_calls": calls} if calls else {})}}],
            "usage": self._usage(body, message),
        }

    def _chunks(self, body: dict[str, Any], message: dict[str, Any]) -> list[dict[str, Any]]:
        cid, model = f"chatcmpl-{next(self._ids)}", body.get("model", CHAT_MODEL)

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        words = text.split(" ")
        out += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words) if text]
        calls = message.get("tool_calls") or []
        if calls:
            out.append(chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                              "function": {"name": c["function"]["name"],
                                                           "arguments": c["function"]["arguments"]}}
                                             for i, c in enumerate(calls)]}))
        out.append(chunk({}, "tool_calls" if calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({"id": cid, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model,
                        "choices": [], "usage": self._usage(body, message)})
        return out

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        given = body.get("input")
        texts = [given] if isinstance(given, str) else list(given or [])
        if texts and not isinstance(texts[0], str):  # token ids, as OpenAIEmbeddings sends unless told not to
            import tiktoken

            encoding = tiktoken.get_encoding("cl100k_base")  # text-embedding-3's
            texts = [encoding.decode(list(t)) for t in texts]
        vectors = self.embed(texts)
        return {"object": "list", "model": body.get("model", EMBEDDING_MODEL),
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": sum(map(_words, texts)), "total_tokens": sum(map(_words, texts))}}

    # --- lifetime ------------------------------------------------------------------------------------

    def __enter__(self) -> "ScriptedOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
