"""The main-context engine the graph and the middleware share.

- ``main_context``: the system prompt rendered and every segment measured in tokens;
- ``compaction``: summarize-and-evict when the window passes its trigger;
- ``recall_sync``: recall kept level with the checkpointed window;
- ``thread_owner``: a thread belongs to the user and agent of its first run;
- ``run``: what one step of a run touches (settings, scope, core memory, stores) and the agent setup;
- ``toolset``: the memory tools as LangChain tools, made by one factory for every path.
"""
