"""Test support: a throwaway PostgreSQL server, a local OpenAI-compatible LLM server, and helpers.

Only tests (and benchmark scripts) import this package; a product module never does
(tests/core/test_layout.py checks).
"""
