"""Internal helpers of ``langchain_mnemonia``; nothing here is public API."""
