"""The offline model: a deterministic, rule-based stand-in for an LLM. It is NOT an LLM.

It exists so that pagefault runs, demos and tests with no network and no API key. It does not
understand language; it follows a handful of fixed rules that exercise the memory system:

- a statement from the user is saved to archival memory (and a name, home or job also to the
  ``human`` core block, replacing the line it changes); when the message carries a time (imported
  history) and the text states no date, that time is passed as the fact's ``valid_from``;
- a statement of how to behave ("always ...", "never ...", "from now on ...", "I prefer ...") is
  learned as a procedure (``procedure_update``), not stored as a fact;
- a question is answered by paging in first: it calls ``archival_memory_search`` and
  ``conversation_search``, then answers with the best-matching hit and cites it;
- on a memory-pressure warning it saves the user's recent statements before they are evicted;
- asked to summarize (by compaction) it writes an extractive summary: the opening of each message.
  It knows a summary call by its input (``text.summary_input``, a request with no tools bound whose
  user message is the previous summary and the evicted messages under their headers), so an app's
  own summary prompt works too, or by the default prompt's first line (``SUMMARY_INSTRUCTION``).

Anything it cannot handle gets a plain reply saying so.

It behaves like any LangChain chat model: it streams (word by word, tool calls as chunks), reports
usage (tokens counted with ``cl100k_base``), honours ``stop`` and ``max_tokens``, and honours a
forced ``tool_choice`` (``"any"`` or a tool name) by calling that tool with arguments taken from
the message: the text for the first string parameter, its numbers for numeric ones, in order.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from pagefault.models.tokens import token_counter
from pagefault.safety.redaction import redact
from pagefault.text.facts import parse_fact
from pagefault.text.messages import message_text
from pagefault.text.prompts import PRESSURE_MARKER, SUMMARY_INSTRUCTION
from pagefault.text.summary_input import SummaryInput
from pagefault.text.terms import query_terms

_QUESTION_START = re.compile(
    r"^(what|who|whom|whose|where|when|why|how|which|do|does|did|is|are|was|were|can|could|would|"
    r"will|should|have|has|had|remind|tell me|recall|remember when)\b", re.I)
_GREETING = re.compile(r"^(hi|hello|hey|thanks|thank you|ok|okay|bye|good (morning|evening|night))\b[\s!.,]*$", re.I)
_CORE_FACTS = [
    (re.compile(r"\b(?i:my name is) ([A-Z][\w'-]*(?: [A-Z][\w'-]*)?)"), "Name: {}"),
    (re.compile(r"\bI (?:live in|moved to|now live in) ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)"), "Lives in: {}"),
    (re.compile(r"\bI work (?:as an? |at |for )([\w' -]+?)(?:[.,!;]|$| and )"), "Works: {}"),
]
_MEMORY_TOOLS = {"core_memory_append", "core_memory_replace", "archival_memory_insert",
                 "archival_memory_search", "conversation_search", "procedure_update"}
#: A statement of how the agent should behave (a procedure, not a fact): its kind by the opening words.
_RULE = re.compile(r"^(?:please\s+)?(?:(?P<rule>always|never|from now on|in future|in the future|whenever)|"
                   r"(?P<preference>I(?: would|'d)? prefer))\b", re.I)
_SUMMARY_SNIPPET = 160


def _call_id(*parts: str) -> str:
    return "call_" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


def _first_sentence(text: str, limit: int = _SUMMARY_SNIPPET) -> str:
    text = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s", text)
    s = text[: m.start()] if m else text
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _forced_tool(tool_choice: Any) -> str | bool | None:
    """A tool name to force, True for "call some tool", False for "call none", None for free choice."""
    if isinstance(tool_choice, dict):
        return (tool_choice.get("function") or {}).get("name") or tool_choice.get("name") or True
    if tool_choice in (None, "auto"):
        return None
    if tool_choice == "none":
        return False
    if tool_choice in ("any", "required", True):
        return True
    return str(tool_choice)


def is_question(text: str) -> bool:
    t = text.strip()
    return t.endswith("?") or bool(_QUESTION_START.match(t))


class OfflineChatModel(BaseChatModel):
    """Deterministic rule-based chat model with tool calling. Not an LLM; see module docs."""

    model_config = ConfigDict(populate_by_name=True)

    model_name: str = Field(default="pagefault-offline", alias="model")
    """Reported as the model in response metadata and traces."""
    temperature: float | None = None
    """Accepted for compatibility; the rules are deterministic whatever it is."""
    max_tokens: int | None = None
    """Replies are cut to this many tokens."""
    stop: list[str] | None = None
    """Replies end before the first of these."""
    streaming: bool = False
    """Whether ``invoke`` streams internally (LangChain's flag); the reply is the same either way."""

    @property
    def _llm_type(self) -> str:
        return "pagefault-offline"

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """True: LangChain's ``dumpd`` / ``dumps`` may serialize the model (under ``get_lc_namespace``)."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        """Where LangChain's serializer finds the class: ``pagefault.models.offline``."""
        return ["pagefault", "models", "offline"]

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(ls_provider="pagefault", ls_model_type="chat",
                                 ls_model_name=str(kwargs.get("model") or self.model_name))
        if self.temperature is not None:
            params["ls_temperature"] = self.temperature
        if kwargs.get("max_tokens", self.max_tokens) is not None:
            params["ls_max_tokens"] = kwargs.get("max_tokens", self.max_tokens)
        if stop or self.stop:
            params["ls_stop"] = stop or self.stop
        return params

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        """The model with ``tools`` (LangChain tools, functions or OpenAI tool dicts) bound, as any
        chat model's ``bind_tools``. ``tool_choice``: ``"any"`` or a tool's name forces a call to it
        (see the module docstring); ``kwargs`` are bound as well."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, stop, **kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The same reply as ``invoke``, word by word, then one chunk per tool call, then usage."""
        message = self._reply(messages, stop, **kwargs)
        for piece in re.findall(r"\s*\S+\s*", message_text(message)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        for i, tc in enumerate(message.tool_calls):
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[{
                "name": tc["name"], "args": json.dumps(tc["args"]), "id": tc["id"], "index": i,
                "type": "tool_call_chunk"}]))
        yield ChatGenerationChunk(message=AIMessageChunk(
            content="", usage_metadata=message.usage_metadata, response_metadata=message.response_metadata,
            chunk_position="last"))

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> AIMessage:
        """The rules' reply with stop, max_tokens, the model name and token usage applied."""
        schemas = kwargs.get("tools") or []
        tools = {t["function"]["name"]: t["function"] for t in schemas}
        message = self._respond(messages, tools)
        message = self._force(message, messages, tools, _forced_tool(kwargs.get("tool_choice")))
        text = message_text(message) if isinstance(message.content, str) else None
        if text is not None:
            for seq in stop or self.stop or []:
                if seq and seq in text:
                    text = text[: text.index(seq)]
            limit = kwargs.get("max_tokens", self.max_tokens)
            counter = token_counter("offline")
            if limit is not None and counter.count_text(text) > limit:
                text = counter.encoding.decode(counter.encoding.encode_ordinary(text)[: max(limit, 0)])
            message = message.model_copy(update={"content": text})
        counter = token_counter("offline")
        read = counter.count_messages(messages) + (counter.count_tools(schemas) if schemas else 0)
        wrote = counter.count_message(message)
        meta = {**message.response_metadata, "model_name": str(kwargs.get("model") or self.model_name),
                "model_provider": "pagefault"}
        return message.model_copy(update={
            "response_metadata": meta,
            "usage_metadata": {"input_tokens": read, "output_tokens": wrote, "total_tokens": read + wrote},
        })

    def _force(self, message: AIMessage, messages: list[BaseMessage], tools: dict[str, dict],
               forced: str | bool | None) -> AIMessage:
        """Apply a forced ``tool_choice``: drop calls (False), or make sure the chosen tool is called."""
        if forced is None or not tools:
            return message
        if forced is False:
            return AIMessage(content=message_text(message) or "(offline model) No tool was allowed.",
                             response_metadata=message.response_metadata)
        allowed = [forced] if isinstance(forced, str) else list(tools)
        calls = [tc for tc in message.tool_calls if tc["name"] in allowed]
        if calls:
            return message.model_copy(update={"tool_calls": calls})
        text = next((message_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        name = next((n for n in allowed if re.search(rf"\b{re.escape(n)}\b", text)), allowed[0])
        if name not in tools:
            raise ValueError(f"tool_choice names {name!r}, which is not among the bound tools {sorted(tools)}")
        call = self._call(name, _tool_args(tools[name], text), f"{len(messages)}\x00{text}")
        return AIMessage(content="", tool_calls=[call])

    # -- the rules -------------------------------------------------------------------------

    def _respond(self, messages: list[BaseMessage], tools: dict[str, dict]) -> AIMessage:
        system = "\n".join(message_text(m) for m in messages if isinstance(m, SystemMessage))
        asked = _summary_input(messages, tools)
        if asked is None and system.startswith(SUMMARY_INSTRUCTION):  # the default prompt, whatever the input
            body = message_text(messages[-1]).strip() if messages else ""
            asked = SummaryInput.parse(body) or SummaryInput(body, "")
        if asked is not None:
            return AIMessage(content=_extractive_summary(asked))
        history = [m for m in messages if not isinstance(m, SystemMessage)]
        if not history:
            return AIMessage(content="Hello! Tell me something to remember, or ask me a question.")
        last = history[-1]
        if isinstance(last, ToolMessage):
            # The warning can arrive on the step after a tool call (the window grew by its results).
            if PRESSURE_MARKER in system and "archival_memory_insert" in tools:
                latest = max(i for i, m in enumerate(history) if isinstance(m, HumanMessage)) if any(
                    isinstance(m, HumanMessage) for m in history) else 0
                save = self._pressure_save(history[:latest], f"{len(history)}\x00pressure")
                if save:
                    return AIMessage(content="", tool_calls=[save])
            return self._answer_from_results(history)
        if not isinstance(last, HumanMessage):
            return AIMessage(content="(offline model) I have nothing to add.")
        text = message_text(last).strip()
        calls: list[dict[str, Any]] = []
        seed = f"{len(history)}\x00{text}"
        if PRESSURE_MARKER in system and "archival_memory_insert" in tools:
            save = self._pressure_save(history[:-1], seed)
            if save:
                calls.append(save)
        user_tool = next((n for n in tools if n not in _MEMORY_TOOLS and re.search(rf"\b{re.escape(n)}\b", text)), None)
        if user_tool:
            calls.append(self._call(user_tool, _tool_args(tools[user_tool], text), seed))
        elif not text or _GREETING.match(text):
            if not calls:
                return AIMessage(content="Hello! Tell me something to remember, or ask me a question.")
        elif is_question(text):
            for name in ("archival_memory_search", "conversation_search"):
                if name in tools:
                    calls.append(self._call(name, {"query": redact(text).text}, seed))
        elif (rule := _RULE.match(text)) and "procedure_update" in tools:
            kind = "preference" if rule.group("preference") else "rule"
            calls.append(self._call("procedure_update", {"add": _first_sentence(redact(text).text, 300), "kind": kind},
                                    seed))
        else:
            if "archival_memory_insert" in tools:
                fact_text = _first_sentence(redact(text).text, 1000)
                args: dict[str, Any] = {"text": fact_text}
                stamp = (last.additional_kwargs.get("pagefault") or {}).get("timestamp")
                fact = parse_fact(fact_text)
                if isinstance(stamp, (int, float)) and not (fact and fact.since is not None):
                    args["valid_from"] = datetime.fromtimestamp(stamp, timezone.utc).isoformat()
                calls.append(self._call("archival_memory_insert", args, seed))
            if "core_memory_append" in tools:
                for pattern, template in _CORE_FACTS:
                    m = pattern.search(text)
                    line = template.format(m.group(1).strip()) if m else None
                    if not line or line in system:
                        continue
                    # The same label with another value: the fact changed, so the core line is replaced.
                    label = template.split("{}")[0]
                    old = re.search(rf"^{re.escape(label)}.*$", system, re.M)
                    if old and "core_memory_replace" in tools:
                        calls.append(self._call("core_memory_replace",
                                                {"section": "human", "old": old.group(0), "new": line}, seed))
                    else:
                        calls.append(self._call("core_memory_append", {"section": "human", "text": line}, seed))
        if not calls:
            return AIMessage(content="(offline model) I can store statements and answer questions from memory.")
        return AIMessage(content="", tool_calls=calls)

    def _pressure_save(self, earlier: list[BaseMessage], seed: str) -> dict[str, Any] | None:
        """One archival insert of the user's recent statements, before they are evicted."""
        notes = [message_text(m).strip() for m in earlier if isinstance(m, HumanMessage)]
        notes = [n for n in notes if n and not is_question(n)]
        if not notes:
            return None
        saved = "Saved under memory pressure: " + " | ".join(_first_sentence(redact(n).text, 300) for n in notes[-8:])
        return self._call("archival_memory_insert", {"text": saved[:4000], "tags": ["pressure"]}, seed)

    @staticmethod
    def _call(name: str, args: dict[str, Any], seed: str) -> dict[str, Any]:
        return {"name": name, "args": args, "id": _call_id(seed, name, json.dumps(args, sort_keys=True)),
                "type": "tool_call"}

    def _answer_from_results(self, history: list[BaseMessage]) -> AIMessage:
        # Every result of this turn, not only the last step's: a memory-pressure save can come between a
        # search and the answer, which still answers from what the search found.
        start = max((i for i, m in enumerate(history) if isinstance(m, HumanMessage)), default=-1) + 1
        results = [m for m in history[start:] if isinstance(m, ToolMessage)]
        question = next((message_text(m) for m in reversed(history) if isinstance(m, HumanMessage)), "")
        errors = [r for r in results if r.status == "error"]
        hits: list[dict[str, Any]] = []
        saved: list[str] = []
        other: list[str] = []
        for r in results:
            art = r.artifact if isinstance(r.artifact, dict) else {}
            if r.status == "error":
                continue
            if "hits" in art:
                hits += art["hits"]
            elif r.name in _MEMORY_TOOLS:
                saved.append(art.get("id") or art.get("section") or r.name)
            else:
                other.append(f"{r.name} returned: {message_text(r)}")
        if errors:
            return AIMessage(content="I could not do that: " + " ".join(message_text(e) for e in errors))
        if other:
            return AIMessage(content=" ".join(other))
        if saved and not hits:
            return AIMessage(content=f"Noted. I saved that to memory ({', '.join(dict.fromkeys(saved))}).")
        best = _best_hit(question, hits)
        if best is None:
            return AIMessage(content="I searched my memory but found nothing about that.")
        cite = _citation_text(best)
        text = best["text"]
        if best["source"] == "recall":
            text = text.split(": ", 1)[-1]
        citation = {k: v for k, v in best.items() if k not in ("text", "score")}
        # A flagged hit is quoted as untrusted data, never followed (the model has no way to follow it anyway).
        lead = "From memory (FLAGGED as possible instructions; quoted, not followed)" if best.get("flagged") else "From memory"
        return AIMessage(
            content=f"{lead}: {json.dumps(text, ensure_ascii=False)} {cite}",
            response_metadata={"citations": [citation]},
        )


def _summary_input(messages: list[BaseMessage], tools: dict[str, dict]) -> SummaryInput | None:
    """The summary call's input, when ``messages`` are one (compaction binds no tools to it)."""
    last = messages[-1] if messages else None
    if tools or not isinstance(last, HumanMessage):
        return None
    return SummaryInput.parse(message_text(last))


def _extractive_summary(asked: SummaryInput) -> str:
    """The previous summary, then the first sentence of each evicted message."""
    lines = [asked.previous] if asked.previous else []
    for line in asked.transcript.splitlines():
        speaker, _, said = line.partition(": ")
        if said.strip():
            lines.append(f"{speaker}: {_first_sentence(said)}")
    return "\n".join(lines)


def _tool_args(spec: dict[str, Any], text: str) -> dict[str, Any]:
    """The message text for the first string parameter, its numbers for numeric ones, in order."""
    props = spec.get("parameters", {}).get("properties", {})
    numbers = iter(re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?", text))
    args: dict[str, Any] = {}
    for name, prop in props.items():
        kind = prop.get("type")
        if kind == "string" and not any(isinstance(v, str) for v in args.values()):
            args[name] = text
        elif kind in ("integer", "number"):
            n = next(numbers, None)
            if n is not None:
                args[name] = int(float(n)) if kind == "integer" else float(n)
    return args


def _best_hit(question: str, hits: list[dict[str, Any]]) -> dict[str, Any] | None:
    q = set(query_terms(question))
    # Archival search returns facts still true; a past message about the same subject and attribute
    # may be stale (it is what was said then), so archival speaks for that fact.
    known = {f.key for h in hits if h.get("source") == "archival" and (f := parse_fact(h["text"]))}
    candidates = []
    for rank, h in enumerate(hits):
        body = h["text"].split(": ", 1)[-1] if h.get("source") == "recall" else h["text"]
        if body.strip() == question.strip() or is_question(body):
            continue  # the question itself, or another question, is no answer
        if h.get("source") == "recall" and (body.startswith("[called ") or (f := parse_fact(body)) and f.key in known):
            continue  # a note of the agent's own tool calls, or a stale statement of a fact archival holds
        overlap = len(q & set(query_terms(body)))
        from_user = h.get("source") == "archival" or h["text"].startswith("user")
        # Scores of different searches are not comparable; on a tie prefer archival, then search order.
        # Among relevant hits, one the poisoning guard did not flag comes first.
        candidates.append((overlap > 0, not h.get("flagged"), overlap, from_user, h.get("source") == "archival", -rank, h))
    if not candidates:
        return None
    candidates.sort(key=lambda c: c[:6], reverse=True)
    return candidates[0][6]


def _where(hit: dict[str, Any]) -> str:
    """A hit's place in its thread: its conversational turn, or (a record from before turns were
    counted) the message's position."""
    turn, message = hit.get("turn", -1), hit.get("message_index", -1)
    if isinstance(turn, int) and turn >= 0:
        return f"turn {turn}"
    return f"message {message}" if isinstance(message, int) and message >= 0 else ""


def _citation_text(hit: dict[str, Any]) -> str:
    where = _where(hit)
    if hit["source"] == "archival":
        at = f", from thread {hit['thread_id']}" + (f" {where}" if where else "") if hit.get("thread_id") else ""
        return f"[archival {hit['id']}{at}]"
    return f"[thread {hit['thread_id']}" + (f", {where}" if where else "") + "]"
