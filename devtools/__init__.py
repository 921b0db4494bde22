"""Developer tools that ship nowhere: fabricated documents and sources for tests and benches, generators for committed files."""
