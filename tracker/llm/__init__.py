"""Prose from a language model behind an OpenAI-compatible API (optional; see issue 13)."""

from tracker.llm.client import ChatClient, Completion, LlmError, LlmErrorKind

__all__ = ["ChatClient", "Completion", "LlmError", "LlmErrorKind"]
