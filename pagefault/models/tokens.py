"""Token accounting for the main context.

OpenAI-family models are counted with tiktoken's real encodings. Those encodings are normally
downloaded on first use; here they are rebuilt from the vocabularies that the installed
``quicktok-v1`` package ships, checked byte for byte against the sha256 that tiktoken itself
pins, and written into tiktoken's own cache directory. After that, plain
``tiktoken.encoding_for_model("gpt-4o")`` works offline, for us and for ``langchain-openai``.

Every other model is counted with ``cl100k_base`` plus a 10 % safety margin: a documented
approximation that errs on the side of compacting early rather than overflowing (unlike the
bytes/4 estimate that overflows local models).

Counting is cached per message (keyed by id and content), so a turn costs O(new messages).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from typing import Any, Iterable, Sequence

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from pagefault.text.messages import message_text

# The URLs and hashes tiktoken uses for these encodings; the cache key is sha1(URL).
_ENCODING_SOURCES = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
_install_lock = threading.Lock()
_installed: set[str] = set()

#: Safety margin applied to non-OpenAI models, whose tokenizer we do not have.
APPROXIMATION_MARGIN = 1.10
#: Tokens added per message by the chat format (OpenAI's published accounting).
TOKENS_PER_MESSAGE = 3
#: Tokens that prime every reply.
TOKENS_PER_REPLY = 3


def tiktoken_cache_dir() -> str:
    """The directory tiktoken reads cached encodings from (same rule as tiktoken.load)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _rebuild_encoding_file(name: str) -> bytes:
    import quicktok  # shipped vocabularies; imported lazily, it is only needed once

    enc = quicktok.get_encoding(name)
    lines = []
    for rank in range(enc.max_token_value + 1):
        if enc.is_special_token(rank):
            continue
        try:
            token = enc.decode_single_token_bytes(rank)
        except Exception:  # a hole in the rank space
            continue
        lines.append(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    return b"".join(lines)


def install_offline_encodings(names: Iterable[str] = ("cl100k_base", "o200k_base")) -> None:
    """Put tiktoken's encodings in its cache from installed data; never downloads.

    Raises RuntimeError if the rebuilt file does not match tiktoken's pinned hash.
    """
    with _install_lock:
        for name in names:
            if name in _installed:
                continue
            url, expected = _ENCODING_SOURCES[name]
            cache_dir = tiktoken_cache_dir()
            path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
            if os.path.exists(path):
                with open(path, "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() == expected:
                        _installed.add(name)
                        continue
            data = _rebuild_encoding_file(name)
            if hashlib.sha256(data).hexdigest() != expected:
                raise RuntimeError(f"rebuilt {name} does not match tiktoken's pinned sha256")
            os.makedirs(cache_dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            _installed.add(name)


def is_openai_model(model: str) -> bool:
    """True for model names whose tokenizer tiktoken knows (gpt-*, o1/o3/o4, ...)."""
    name = model.split(":", 1)[1] if model.startswith("openai:") else model
    try:
        tiktoken.model.encoding_name_for_model(name)
        return True
    except KeyError:
        return False


#: Texts at least this long have their counts remembered (``count_text``), up to LONG_TEXTS_KEPT of them.
LONG_TEXT_CHARS = 200
LONG_TEXTS_KEPT = 256
#: Lines of long texts whose counts are remembered, and the longest line remembered (a longer one is
#: rare, and holding thousands of them would hold megabytes).
LINES_KEPT = 20_000
LINE_KEPT_CHARS = 4_000
#: Where a long text is cut into lines to count: after a line break, before a letter or digit. The
#: encodings' pre-tokenizers never join across such a point (a pre-token that takes in line breaks
#: ends there, or, in o200k, takes in "/" too), so the lines' counts add up to the text's exactly
#: (a property test checks both encodings).
_LINE_START = re.compile(r"(?<=\n)(?=[^\W_])")


#: Tool schema lists a counter remembers the tokens of (``TokenCounter.count_tools``): a process runs a few graphs.
TOOL_LISTS_KEPT = 64


class TokenCounter:
    """Counts tokens of text, messages and tool schemas for one model.

    ``model`` is a LangChain model id ('offline', 'openai:gpt-4o-mini', ...): OpenAI models are
    counted with their own tiktoken encoding, others with cl100k_base plus a safety margin.
    ``cache_size``: message counts remembered (by message id and content). ``exact`` tells whether
    counts are the provider's real ones or the approximation.
    """

    def __init__(self, model: str = "offline", cache_size: int = 50_000) -> None:
        self.model = model
        name = model.split(":", 1)[1] if model.startswith("openai:") else model
        if is_openai_model(model):
            enc_name = tiktoken.model.encoding_name_for_model(name)
            self.exact = True
            self.margin = 1.0
        else:
            enc_name = "cl100k_base"
            # The offline model is our own; cl100k is its defined tokenizer, so it is exact.
            self.exact = model == "offline"
            self.margin = 1.0 if self.exact else APPROXIMATION_MARGIN
        if enc_name in _ENCODING_SOURCES:
            install_offline_encodings([enc_name])
        self.encoding = tiktoken.get_encoding(enc_name)
        self._cache: OrderedDict[tuple, int] = OrderedDict()
        self._cache_size = cache_size
        self._texts: OrderedDict[str, int] = OrderedDict()
        self._lines: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._tools: OrderedDict[str, int] = OrderedDict()

    def count_text(self, text: str) -> int:
        """Tokens in a plain string (special-token text is counted as ordinary text). Long texts are
        remembered: a run sends the same system prompt and tool schemas at each of its steps. A long
        text not seen before is counted line by line, each line remembered: successive prompts and
        summaries differ in a few lines, and only those are encoded."""
        long = len(text) >= LONG_TEXT_CHARS
        hit = self._recall(self._texts, text) if long else None
        if hit is not None:
            return hit
        if long:
            n = sum(self._count_line(line) for line in _LINE_START.split(text) if line)
        else:
            n = len(self.encoding.encode_ordinary(text))
        n = n if self.margin == 1.0 else -(-n * round(self.margin * 100) // 100)  # ceil, in integers
        if long:
            self._keep(self._texts, text, n, LONG_TEXTS_KEPT)
        return n

    def _count_line(self, line: str) -> int:
        if len(line) > LINE_KEPT_CHARS:
            return len(self.encoding.encode_ordinary(line))
        hit = self._recall(self._lines, line)
        if hit is None:
            hit = len(self.encoding.encode_ordinary(line))
            self._keep(self._lines, line, hit, LINES_KEPT)
        return hit

    def _recall(self, cache: OrderedDict[Any, int], key: Any) -> int | None:
        """A remembered count (marked recently used), or None."""
        with self._lock:
            hit = cache.get(key)
            if hit is not None:
                cache.move_to_end(key)
            return hit

    def _keep(self, cache: OrderedDict[Any, int], key: Any, n: int, size: int) -> None:
        with self._lock:
            cache[key] = n
            if len(cache) > size:
                cache.popitem(last=False)

    def count_message(self, message: BaseMessage) -> int:
        """Tokens one message costs in a chat request, cached by id and content."""
        key = (message.id, message.type, _content_key(message))
        hit = self._recall(self._cache, key)
        if hit is not None:
            return hit
        n = TOKENS_PER_MESSAGE + self.count_text(message.type) + self.count_text(message_text(message))
        if isinstance(message, AIMessage) and message.tool_calls:
            for call in message.tool_calls:
                n += self.count_text(call["name"]) + self.count_text(json.dumps(call["args"]))
        if isinstance(message, ToolMessage):
            n += self.count_text(message.tool_call_id)
        if message.name:
            n += self.count_text(message.name)
        self._keep(self._cache, key, n, self._cache_size)
        return n

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens ``messages`` cost in a chat request: the sum of ``count_message``."""
        return sum(self.count_message(m) for m in messages)

    def count_tools(self, schemas: Sequence[dict[str, Any]]) -> int:
        """Tokens of the tool schemas as they are sent (JSON of each function spec). Remembered by their
        JSON: a graph measures the same schemas at every step (encoding them is about 1 ms; the JSON is
        tens of microseconds)."""
        if not schemas:
            return 0
        texts = [json.dumps(s, sort_keys=True) for s in schemas]
        key = "\n".join(texts)
        hit = self._recall(self._tools, key)
        if hit is None:
            hit = sum(self.count_text(t) for t in texts)
            self._keep(self._tools, key, hit, TOOL_LISTS_KEPT)
        return hit


def _content_key(message: BaseMessage) -> int:
    content = message.content
    if isinstance(content, str):
        return hash(content)
    return hash(json.dumps(content, sort_keys=True, default=str))


_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def token_counter(model_name: str) -> TokenCounter:
    """The process's counter for ``model_name``: the graph and the offline model count the same
    messages and prompts, and one cache spares counting each of them twice."""
    with _counters_lock:
        if model_name not in _counters:
            _counters[model_name] = TokenCounter(model_name)
        return _counters[model_name]
