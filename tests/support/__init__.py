"""Shared test helpers: real servers started and stopped by the tests."""
