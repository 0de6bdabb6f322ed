"""Command-line interface (click)."""
