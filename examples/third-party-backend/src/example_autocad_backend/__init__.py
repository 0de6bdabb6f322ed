"""Example backend."""
