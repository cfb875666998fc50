"""Text primitives every layer shares: Unicode that stores can hold (``unicode``), the text of a
LangChain message (``messages``), the content words of a search (``terms``), facts with a date in
them (``facts``), the fixed instructions pagefault writes into prompts (``prompts``) and stored text
made inert inside the prompt's tags (``tags``)."""
