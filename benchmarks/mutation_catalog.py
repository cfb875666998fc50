"""What the mutation check (``benchmarks/mutation.py``) mutates: the safety-critical areas, the named
functions whose mutants are generated, the test files run against each area, the hand-chosen mutants,
and the survivors reviewed as equivalent (each with the reason it changes no behaviour).

Scope limits, on purpose:
- guard: the scanning and verdict code of ``safety/guard.py`` (``normalize``, ``_match``, ``first_match``,
  ``_scan``, the scorer's windowing and logit), and where the guard is applied on write and on
  retrieval (``tools/trust.py``, the flag helpers of ``tools/handlers.py``, recall's stamp); not its
  ~700 lines of rule tables and regular expressions, nor the literal prefilter and feature hashing
  (performance machinery whose effect on detection ``benchmarks/injection.py`` measures);
- scope filters: where-clause building and the scope checks of the stores (``chroma_where``, the SQL
  filters, ``where_sql``, the post-filters, ``ArchivalStore.get`` / ``search`` / ``count``, recall's
  thread queries); not recall's ranking (weights and boosts), which hand-chosen mutants cover for the
  filters it passes on;
- compaction: the eviction plan (``eviction_units``, ``protected_from``, ``plan_eviction``,
  ``plan_compaction``) and the state update; not the summarizer's prompt or the events;
- served settings: the refusal path (``check_client_settings``, ``client_values``, ``for_run``,
  ``for_app_run``, ``identity_of``); not ``context_schema`` (Studio's form);
- auth: every handler of ``serve/auth.py`` and its token configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from mutation_mutants import HandMutant


@dataclass(frozen=True)
class Area:
    """One safety property: ``functions`` (file -> qualified names) whose mutants are generated, and the
    ``tests`` run against every mutant of the area (fast, targeted ones first: ``-x`` stops at the first
    failure)."""

    key: str
    title: str
    functions: dict[str, tuple[str, ...]]
    tests: tuple[str, ...]


COMPACTION_TESTS = (
    "tests/unit/window/test_pairing_mutants.py",
    "tests/unit/window/test_compaction_plan.py",
    "tests/unit/window/test_compaction_property.py",
    "tests/unit/window/test_fit_summary.py",
    "tests/integration/test_memory_graph.py",
    "tests/integration/test_middleware.py",
)
REDACTION_TESTS = (
    "tests/unit/safety/test_redaction.py",
    "tests/unit/safety/test_redaction_gaps.py",
    "tests/integration/test_secrets.py",
    "tests/integration/test_readme_claims.py::test_each_listed_secret_format_is_redacted",
    "tests/integration/test_readme_claims.py::test_each_listed_secret_format_stays_out_of_archival_and_core_memory",
    "tests/unit/window/test_summary_error.py",
)
SCOPE_TESTS = (
    "tests/unit/stores/test_scope_filters.py",
    "tests/integration/test_scope_filters_postgres.py",
    "tests/unit/stores/test_search_shortcuts.py",
    "tests/unit/stores/test_resident_vectors.py",
    "tests/unit/stores/test_resident_bm25.py",
    "tests/unit/stores/test_tiered_vectors.py",
    "tests/unit/stores/test_validity.py",
    "tests/integration/test_isolation_and_filters.py",
    "tests/integration/test_fuzz_inputs.py",
    "tests/integration/test_postgres.py",
    "tests/integration/test_chroma_server.py",
)
GUARD_TESTS = (
    "tests/unit/safety/test_guard.py",
    "tests/unit/safety/test_guard_multilingual.py",
    "tests/unit/safety/test_guard_scorer.py",
    "tests/unit/safety/test_guard_gaps.py",
    "tests/unit/stores/test_stored_verdicts.py",
    "tests/unit/tools/test_approval.py",
    "tests/integration/test_procedural.py",
    "tests/unit/safety/test_guard_edges.py",
)
SETTINGS_TESTS = (
    "tests/unit/serve/test_client_settings.py",
    "tests/integration/test_middleware.py",
    "tests/server/test_serve_safely.py",
)
AUTH_TESTS = (
    "tests/unit/serve/test_auth_config.py",
    "tests/unit/serve/test_auth_handlers.py",
    "tests/server/test_thread_owner_agent.py",
    "tests/server/test_serve_safely.py",
)

AREAS: tuple[Area, ...] = (
    Area("compaction", "compaction pairing", {
        "pagefault/window/compaction.py": ("eviction_units", "protected_from", "plan_eviction", "plan_compaction",
                                           "CompactionPlan.reach", "Compaction.changed", "Compaction.messages_update",
                                           "Compaction.update"),
    }, COMPACTION_TESTS),
    Area("scope", "scope filters in archival and recall", {
        "pagefault/stores/scope.py": ("Scope.__post_init__", "Scope.key", "Scope.namespace"),
        "pagefault/text/ids.py": ("check_id",),
        "pagefault/stores/index/hybrid.py": ("chroma_where", "HybridIndex.find", "HybridIndex.unfiltered_neighbours"),
        "pagefault/stores/index/lexical_sqlite.py": ("_filters", "LexicalIndex.matching", "LexicalIndex.fact_records"),
        "pagefault/stores/index/lexical_postgres.py": ("PostgresLexicalIndex.search",),
        "pagefault/stores/index/resident_vectors.py": ("where_sql", "_sql_value", "ResidentCollection._select_ids",
                                                       "ResidentCollection.get"),
        "pagefault/stores/archival.py": ("ArchivalStore.get", "ArchivalStore.search", "ArchivalStore._fact_hits",
                                         "ArchivalStore.count"),
        "pagefault/stores/recall.py": ("RecallIndex._thread_ids", "RecallIndex.user_messages_before"),
    }, SCOPE_TESTS),
    Area("redaction", "redaction", {
        "pagefault/safety/redaction.py": ("environment_secrets", "redact", "marker"),
        "pagefault/window/compaction.py": ("_summary", "_fallback"),
        "pagefault/stores/recall.py": ("recall_text",),
    }, REDACTION_TESTS),
    Area("guard", "the guard on write and on retrieval", {
        "pagefault/safety/guard.py": ("normalize", "first_match", "_match", "scan", "_scan", "Verdict.flagged",
                                      "Verdict.rules", "windows", "_sentences", "Scorer._logit", "Scorer.flagged_window",
                                      "check_mode"),
        "pagefault/tools/trust.py": ("Origins.attribute", "Origins.untrusted", "turn_messages", "origins_of"),
        "pagefault/tools/handlers.py": ("_scanned", "recall_flags", "archival_flags", "_search",
                                        "_edit_provenance", "_procedure_reasons"),
        "pagefault/stores/recall.py": ("guard_stamp", "stored_flags"),
    }, GUARD_TESTS),
    Area("settings", "served-context refusal", {
        "pagefault/serve/settings.py": ("identity_of", "check_client_settings", "client_values", "allowed_models",
                                        "ServerSettings.from_env", "ServerSettings.of_app", "ServerSettings.for_run",
                                        "ServerSettings.for_app_run"),
    }, SETTINGS_TESTS),
    Area("auth", "auth handlers", {
        "pagefault/serve/auth.py": ("AuthConfig.from_env", "AuthConfig.verify", "verified_user", "authenticate", "_user",
                                    "_check_settings", "_refuse_server_keys", "_claim_thread", "_tag", "_mine",
                                    "on_thread_create", "on_thread_update", "on_run_create", "on_threads",
                                    "on_assistant_create", "on_assistant_update", "on_assistants", "on_cron_create",
                                    "on_crons", "on_store"),
    }, AUTH_TESTS),
)

_C, _R, _S = "pagefault/window/compaction.py", "pagefault/safety/redaction.py", "pagefault/stores/index/hybrid.py"
_G, _H, _T = "pagefault/safety/guard.py", "pagefault/tools/handlers.py", "pagefault/tools/trust.py"
_SET, _AUTH = "pagefault/serve/settings.py", "pagefault/serve/auth.py"

HAND: tuple[HandMutant, ...] = (
    # -- compaction pairing ----------------------------------------------------------------------------
    HandMutant("compaction", _C, "if isinstance(m, AIMessage) and (m.tool_calls or m.invalid_tool_calls):",
               "if isinstance(m, AIMessage) and m.tool_calls:",
               "an AI message with only invalid_tool_calls is dropped from the pairing rule (issue 22)",
               COMPACTION_TESTS),
    HandMutant("compaction", _C, "while j < len(messages) and isinstance(messages[j], ToolMessage):",
               "while j < len(messages) and isinstance(messages[j], ToolMessage) and j < i + 2:",
               "only the first result of a multi-call AI message is kept with it", COMPACTION_TESTS),
    HandMutant("compaction", _C, "        if shed >= excess or unit[-1] >= limit:", "        if shed >= excess:",
               "the current user turn may be evicted when much must go", COMPACTION_TESTS),
    HandMutant("compaction", _C, "            return i\n    return len(messages)",
               "            return i + 1\n    return len(messages)",
               "the current user message itself may be evicted", COMPACTION_TESTS),
    HandMutant("compaction", _C, "        count = unit[-1] + 1", "        count = unit[0] + 1",
               "eviction cuts between a tool call and its results", COMPACTION_TESTS),
    # -- scope filters -----------------------------------------------------------------------------------
    HandMutant("scope", "pagefault/stores/scope.py", 'return f"{len(self.user_id)}:{self.user_id}|{self.agent_id}"',
               'return f"{self.user_id}|{self.agent_id}"',
               "the scope key loses its length prefix: user 'a|b' and agent 'c' meet user 'a' and agent 'b|c'",
               SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/scope.py", 'enc = lambda s: s.replace("%", "%25").replace(".", "%2E")',
               'enc = lambda s: s.replace(".", "%2E")',
               "core namespaces stop escaping '%': users 'a.b' and 'a%2Eb' share core memory", SCOPE_TESTS),
    HandMutant("scope", _S, 'clauses: list[dict[str, Any]] = [{"scope": scope}]',
               'clauses: list[dict[str, Any]] = [{"scope": {"$ne": ""}}]',
               "Chroma's scope clause matches every scope (the dense side of a filtered search crosses users)",
               SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/index/lexical_sqlite.py", 'sql: list[str] = [f"{scope_column} = ?"]',
               'sql: list[str] = [f"({scope_column} = ? OR 1)"]',
               "the SQLite BM25 side ignores the scope", SCOPE_TESTS),
    HandMutant("scope", _S, '                if (m or {}).get("scope") != scope:\n                    continue\n',
               "",
               "find() with one equality filter returns other scopes' records (fact timelines cross users)",
               SCOPE_TESTS),
    HandMutant("scope", _S, "near = {i: 1.0 - float(d) for i, d in zip(ids, dists) if i in keep}",
               "near = {i: 1.0 - float(d) for i, d in zip(ids, dists)}",
               "unfiltered nearest neighbours are not filtered through the BM25 shadow", SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/archival.py",
               'if not hits or hits[0].metadata.get("scope") != scope.key:', "if not hits:",
               "ArchivalStore.get returns another scope's record by id", SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/recall.py",
               'where = {"$and": [{"scope": scope.key}, {"thread_id": thread_id}, *clauses]}',
               'where = {"$and": [{"thread_id": thread_id}, *clauses]}',
               "recall's per-thread counts read every scope's messages of that thread id", SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/recall.py",
               "filters = SearchFilters(thread_id=thread_id, start=start, end=end)\n        turn_lexical",
               "filters = SearchFilters(start=start, end=end)\n        turn_lexical",
               "conversation_search ignores its thread filter", SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/index/resident_vectors.py",
               'glue = " AND " if key == "$and" else " OR "', 'glue = " OR "',
               "the resident vectors read $and as $or (recall's scope clause ORed away on the embedded path)",
               SCOPE_TESTS),
    HandMutant("scope", "pagefault/stores/index/lexical_postgres.py",
               'filters, args = ["d.scope = %(scope)s"]', 'filters, args = ["true"]',
               "the Postgres BM25 side ignores the scope", SCOPE_TESTS),
    # -- redaction ---------------------------------------------------------------------------------------
    HandMutant("redaction", _R, "    for name, value in environment_secrets():", "    for name, value in []:",
               "the process's own secret-looking environment values are no longer redacted (issue 22)",
               REDACTION_TESTS),
    HandMutant("redaction", _R,
               '    ("jwt", r"\\beyJ[A-Za-z0-9_\\-]{8,}\\.eyJ[A-Za-z0-9_\\-]{8,}\\.[A-Za-z0-9_\\-]{8,}"),\n', "",
               "JWTs are no longer redacted", REDACTION_TESTS),
    HandMutant("redaction", _R, '    ("slack-token", r"\\bxox[abposr]-[A-Za-z0-9\\-]{10,}"),\n', "",
               "Slack tokens are no longer redacted", REDACTION_TESTS),
    HandMutant("redaction", _R, 'return f"{m.group(1)}{m.group(2)}{marker(found[-1])}{m.group(2)}"',
               "return m.group(0)", "`password: ...` / `api_key=...` values are kept", REDACTION_TESTS),
    HandMutant("redaction", _C, "    if ctx.redact_secrets:  # the summary is memory", "    if False:  # the summary is memory",
               "compaction summaries are no longer redacted", REDACTION_TESTS),
    HandMutant("redaction", "pagefault/stores/archival.py", "        if redact_secrets:\n            text = redact(text).text",
               "        if False:\n            text = redact(text).text", "archival inserts are no longer redacted",
               REDACTION_TESTS),
    HandMutant("redaction", "pagefault/stores/recall.py",
               'return repaired(redact(f"{speaker(message)}: {text}"[:MAX_INDEXED_CHARS]).text)',
               'return repaired(f"{speaker(message)}: {text}"[:MAX_INDEXED_CHARS])',
               "recall indexes messages unredacted", REDACTION_TESTS),
    HandMutant("redaction", "pagefault/stores/core.py", "return redact(text).text if self.redact_secrets else text",
               "return text", "core memory edits are no longer redacted", REDACTION_TESTS),
    # -- the guard ---------------------------------------------------------------------------------------
    HandMutant("guard", _H, "return tuple(dict.fromkeys((*stored, *scan(text[:ARTIFACT_HIT_CHARS]).rules)))",
               "return tuple(stored)", "retrieved text is no longer rescanned (stored flags only)", GUARD_TESTS),
    HandMutant("guard", _H, "    if rec.guard_version == GUARD_VERSION:\n        return rec.provenance.flags",
               "    if True:\n        return rec.provenance.flags",
               "archival hits flagged by an older guard are never rescanned", GUARD_TESTS),
    HandMutant("guard", "pagefault/stores/archival.py",
               "prov = replace(prov, flags=tuple(dict.fromkeys((*prov.flags, *scan(text).rules))))",
               "prov = replace(prov, flags=tuple(prov.flags))", "archival inserts are not scanned on write",
               GUARD_TESTS),
    HandMutant("guard", _H, "            found = [(h, f) for h, f in found if not f]", "            found = list(found)",
               "guard=quarantine no longer hides flagged hits", GUARD_TESTS),
    HandMutant("guard", _T, '                if h.get("flags"):', "                if False:",
               "reading flagged memory no longer taints the turn", GUARD_TESTS),
    HandMutant("guard", _T, "            rules = scan_in_full(message_text(m)).rules", "            rules = ()",
               "flagged tool output no longer taints the turn", GUARD_TESTS),
    HandMutant("guard", _T, 'return [f"the text is instruction-shaped ({r})" for r in scan(text).rules] + list(self.taint)',
               "return list(self.taint)", "an instruction-shaped core edit is trusted when the turn is clean",
               GUARD_TESTS),
    HandMutant("guard", _G, "    for view in decoded_views(plain):", "    for view in []:",
               "the guard no longer reads decoded views (base64, rot13, ...)", GUARD_TESTS),
    HandMutant("guard", _G, "    if SCORER is not None and not out:", "    if False:",
               "the learned scorer is never consulted", GUARD_TESTS),
    HandMutant("guard", _G, "    plain = normalize(text)", "    plain = text",
               "full-width and styled letters are no longer normalized before scanning", GUARD_TESTS),
    HandMutant("guard", "pagefault/stores/recall.py", "flags = scan(recall_body(text)[:HIT_TEXT_CHARS]).rules",
               "flags = ()", "recall entries are stamped unflagged at index time", GUARD_TESTS),
    HandMutant("guard", _H, 'reasons = call.origins.untrusted(text) if call.guard != "off" else []', "reasons = []",
               "core edits from untrusted content are applied without approval", GUARD_TESTS),
    # -- served-context refusal -------------------------------------------------------------------------------
    HandMutant("settings", _AUTH, 'client.update(check_client_settings(configurable, where=f"{where} config.configurable", '
                                  "configurable=True))",
               "client.update({k: v for k, v in (configurable or {}).items() if not k.startswith('checkpoint') "
               "and k != 'thread_id'})",
               "a run's configurable is taken unchecked: a client's base_url reaches the model", SETTINGS_TESTS),
    HandMutant("settings", _SET, "    if unknown:\n        raise SettingsError(", "    if False:\n        raise SettingsError(",
               "a misspelled key (usr_id) is dropped silently instead of refused", SETTINGS_TESTS),
    HandMutant("settings", _SET, "        if model not in self.allowed_models:", "        if False:",
               "a client may choose any model", SETTINGS_TESTS),
    HandMutant("settings", _SET, "        if identity.user_id is not None:\n",
               "        if identity.user_id is not None and not user:\n",
               "an authenticated run may name another user_id and get that user's memory", SETTINGS_TESTS),
    HandMutant("settings", _SET, "            if self.require_user and not partial:", "            if False:",
               "a run without auth and without user_id runs as the shared default user", SETTINGS_TESTS),
    HandMutant("settings", _SET, "changed = [k for k in (*SERVER_FIELDS, *INTERNAL_FIELDS) if k in values",
               "changed = [k for k in INTERNAL_FIELDS if k in values",
               "a served create_agent app's run context may change server-owned settings (data_dir, base_url)",
               SETTINGS_TESTS),
    HandMutant("settings", _SET, '        for key in ("user_id", "agent_id"):',
               '        for key in ("user_id", "agent_id", "data_dir"):',
               "an app run's configurable may choose where memory lives", SETTINGS_TESTS),
    HandMutant("settings", _SET, "    if AUTHENTICATED in permissions and isinstance(user, str) and user:",
               "    if isinstance(user, str) and user:",
               "a Studio or anonymous user counts as authenticated", SETTINGS_TESTS),
    # -- auth handlers ----------------------------------------------------------------------------------------
    HandMutant("auth", _AUTH, 'options={"require": ["exp", "sub"]}', 'options={"require": ["sub"]}',
               "tokens without an expiry are accepted", AUTH_TESTS),
    HandMutant("auth", _AUTH, "    if AUTHENTICATED not in (ctx.permissions or ()):", "    if False:",
               "with tokens on, Studio's unauthenticated requests get through", AUTH_TESTS),
    HandMutant("auth", _AUTH, "history): the owner's only.\"\"\"\n    return _mine(_user(ctx))",
               "history): the owner's only.\"\"\"\n    return None", "thread reads are not filtered by owner", AUTH_TESTS),
    HandMutant("auth", _AUTH, "    metadata[OWNER] = user\n", "",
               "new threads, runs, crons and assistants are not tagged with their owner", AUTH_TESTS),
    HandMutant("auth", _AUTH, "        elif namespace[:2] != own:", "        elif namespace[:1] != own[:1]:",
               "a token reaches any pagefault store namespace", AUTH_TESTS),
    HandMutant("auth", _AUTH, "    elif recorded != owner:", "    elif False:",
               "another user's run on an owned thread is let in", AUTH_TESTS),
    HandMutant("auth", _AUTH, "    if metadata.get(OWNER, user) != user or THREAD_OWNER in metadata or CREATED_BY in metadata:",
               "    if THREAD_OWNER in metadata or CREATED_BY in metadata:",
               "a client may set the owner tag of what it creates", AUTH_TESTS),
    HandMutant("auth", _AUTH, '        return {"$or": [{OWNER: user}, {CREATED_BY: "system"}]}', "        return None",
               "one user's assistants are visible to every user", AUTH_TESTS),
    HandMutant("auth", _AUTH, "for a in algorithms) or public and any(", "for a in algorithms) or False and any(",
               "a public key may be used with an HS* algorithm (the HMAC key confusion)", AUTH_TESTS),
)

#: Survivors reviewed by hand and shown to change no behaviour: mutant id -> why.
EQUIVALENT: dict[str, str] = {
    "2d297e7158": ("HybridIndex.find: without the one-key shortcut the query is the scope-and-key `$and`; the loop drops "
                  "other scopes either way, so the same records come back (the shortcut is for speed)."),
    "2ae5d9b749": ("HybridIndex.find: the score of a listing is never read (timeline, settle, consolidation and the "
                  "inspector use text, metadata and vectors); search scores come from `search`."),
    "a40a963686": ("HybridIndex.unfiltered_neighbours: asking for OVERFETCH * n at once instead of n first returns the "
                  "same first n passing records (the n-first round only saves work when all pass)."),
    "b8daeef58e": ("HybridIndex.unfiltered_neighbours: `reshape(1, -1)` -> `reshape(1, -2)`: numpy reads any negative "
                  "dimension as \"the rest\", the same (1, dim) array."),
    "67973cbccb": ("HybridIndex.unfiltered_neighbours: no backend gets here with `matching` answering None (SQLite's "
                  "always returns a set; Postgres has can_match False and returns at the top), so the guard cannot "
                  "fire."),
    "cd9b739ac3": ("HybridIndex.unfiltered_neighbours: with exactly n passing, `> n` goes on to the OVERFETCH round, "
                  "whose first n passing records are the same n."),
    "68158b70fa": ("LexicalIndex.matching: without the early return, SQLite runs `d.id IN ()` (an empty list is valid "
                  "SQL there) and returns the same empty set."),
    "56e53351ac": ("_sql_value: a bool then falls to the int branch and is returned as is; sqlite3 binds True and False "
                  "as 1 and 0, the same values `int(v)` gives."),
    "ceaa7f397b": ("ResidentCollection._select_ids: `LIMIT -1` -> `LIMIT -2`: SQLite reads any negative LIMIT as no "
                  "limit."),
    "973661b4fe": ("RecallIndex.user_messages_before: without the early return, index 0 (or below) asks recall for user "
                  "messages with `turn < 0`, of which there are none: 0 either way."),
    "ea6951823e": ("RecallIndex.user_messages_before: at index 0, `< 0` skips the early return and the query for `turn < "
                  "0` finds nothing: 0 either way."),
    "ba84c2a53e": ("recall_text: `split(\"\\n\", 1)[0]` -> `split(\"\\n\", 2)[0]`: the first line is the same however "
                  "many splits follow."),
    "00e3ae7090": ("first_match: the early exit on a match at position 0 only saves work: no later alternative can start "
                  "earlier, and a tie keeps the earlier one."),
    "c73e2e9bdd": ("first_match: the same early exit (its `break` alone) deleted: no later alternative can start before "
                  "0, and ties keep the earlier one."),
    "9198b23773": ("ArchivalStore.count: the return for nothing journalled deleted, so `count_with(scope, [])` answers: "
                  "with no ids it reads the same count as `count(scope)` on both lexical backends (SQLite: the counts "
                  "row plus 0 minus 0; Postgres: the same count(*) plus 0 minus 0)."),
    "12b8188fd3": ("_match: the branch for text whose lower-casing changes its length is unreachable after `normalize`: "
                  "U+0130 is the only such character and `normalize` maps it to I."),
    "217460e709": ("_match: in the same unreachable branch (see 12b8188fd3)."),
    "aeb3d88e8e": ("_sentences: `rfind(\" \", 0, ...)` -> `rfind(\" \", 1, ...)`: the sentence is stripped, so there is "
                  "never a space at index 0 to find."),
    "c2f3ff491b": ("_sentences: `cut > 0` -> `cut >= 0`: rfind returns -1 or a position above 0 (the sentence is "
                  "stripped), never 0."),
    "21273e42ff": ("Scorer.flagged_window: a three-sentence text then goes through `windows`, whose windows are the same "
                  "adjacent pairs the pair path scores, with the same features (`_pair_features` is `features` of each "
                  "pair, computed once per sentence)."),
    "f9f9a23cdb": ("plan_compaction: `max(over, 0)` -> `max(over, 1)` differs only when over <= 0, and then a message is "
                  "cut only if it is over its share (cost > max_msg), where min(max_msg, cost - 1) = min(max_msg, cost) "
                  "= max_msg."),
    "4adde93eaa": ("check_id: its return value is never used (Scope.__post_init__ calls it for the checks only)."),
    "c5ea61a1bc": ("client_values: without the early return, None is neither a mapping, a dataclass nor a pydantic "
                  "model, and the last branch returns {} the same."),
}
