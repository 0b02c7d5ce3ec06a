"""Typer commands: parsing and printing only; the logic lives in the library."""
