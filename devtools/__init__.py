"""Developer tools that ship nowhere.

Fabricated documents and sources for tests and benches, generators for committed files.
"""
