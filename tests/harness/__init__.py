"""Helpers for tests that run real components: the tiny model, a vLLM server, load, the stack."""
