"""pagefault for LangChain apps that already exist: ``PagefaultMiddleware`` (``middleware``),
``memory_tools`` (``langchain_tools``) and ``ArchivalRetriever`` (``retriever``)."""
