"""`make screenshots` pages rendered by headless Chromium from the live webserver: produced and not blank.

Three of the project pages (the lineage with its groups expanded, a dormant task, a refused run) keep
the test short; `make screenshots` renders all of them with the same code.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from bench.screenshots import CHROMIUM, capture, project_pages

MIN_DISTINCT_COLOURS = 64


def decode_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered scanlines of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, chunks = 8, {}
    idat = b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IDAT":
            idat += body
        chunks.setdefault(kind, body)
        offset += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(row) for row in rows]


@pytest.mark.slow  # every documented screen in Chromium (~1-3 min)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_screenshots_are_produced_and_not_blank(webserver, released_through_ui, refused_task_run, tmp_path):
    refused_job, refused = refused_task_run
    pages = [
        page
        for page in project_pages(released_through_ui, refused, refused_job)
        if page.file_name in {"lineage.png", "dormant_task.png", "refused_task_run.png"}
    ]
    assert len(pages) == 3
    written = capture(webserver.base_url, pages, tmp_path)
    assert [p.name for p in written] == [page.file_name for page in pages]
    for path in written:
        width, height, rows = decode_png(path)
        assert (width, height) == (1600, 1000), path.name
        colours = {row[i : i + 3] for row in rows[::8] for i in range(0, len(row), 3 * 8)}
        assert len(colours) >= MIN_DISTINCT_COLOURS, f"{path.name} looks blank ({len(colours)} colours)"
        text_rows = sum(1 for row in rows[::4] if len(set(row)) > 8)
        assert text_rows > len(rows[::4]) // 4, f"{path.name} is mostly empty"
