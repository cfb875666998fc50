"""The fixed instructions pagefault writes into prompts.

The offline model (``models.offline``) reads prompts the way an LLM would, so it recognises these
by their text; the window (``window.main_context``, ``window.compaction``) writes them.
"""

#: The compaction node's instruction; the offline model recognises it by this first line.
SUMMARY_INSTRUCTION = "Summarize the conversation excerpt below for your own future reference."
#: The reason node's memory-pressure note; the offline model recognises it by this marker.
PRESSURE_MARKER = "MEMORY PRESSURE"
