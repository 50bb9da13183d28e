"""A minimal PNG reader for tests that look at a screenshot (test_health.py's HTML report in a
headless browser): 8-bit RGB or RGBA, not interlaced, which is what Chromium writes. Standard
library only (zlib, struct): no PIL on the test machines. PNG spec: https://www.w3.org/TR/png/
"""
import struct
import zlib
from collections import Counter
from typing import List, NamedTuple, Tuple

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Image(NamedTuple):
    width: int
    height: int
    channels: int          # 3 (RGB) or 4 (RGBA)
    rows: List[bytes]      # unfiltered scanlines, `width * channels` bytes each

    def rgb(self, x: int, y: int) -> Tuple[int, int, int]:
        i = x * self.channels
        row = self.rows[y]
        return row[i], row[i + 1], row[i + 2]


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(path) -> Image:
    data = open(path, "rb").read()
    if data[:8] != _SIGNATURE:
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length  # length, type, body, CRC
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs (depth={depth} "
                         f"color={color} interlace={interlace})")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(a, b, c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return Image(width, height, channels, rows)


def hex_rgb(color: str) -> Tuple[int, int, int]:
    """"#1f77b4" -> (31, 119, 180)."""
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def pixels_near(image: Image, color: str, tolerance: int = 24) -> List[Tuple[int, int]]:
    """The (x, y) of every pixel within `tolerance` of `color` in each channel: the solid core of
    a line drawn in that colour, whatever anti-aliasing does to its edges."""
    r0, g0, b0 = hex_rgb(color)
    found = []
    ch = image.channels
    for y, row in enumerate(image.rows):
        for i in range(0, len(row), ch):
            if abs(row[i] - r0) <= tolerance and abs(row[i + 1] - g0) <= tolerance and \
                    abs(row[i + 2] - b0) <= tolerance:
                found.append((i // ch, y))
    return found


class Shape(NamedTuple):
    """Where a colour's pixels lie: their count and extent, how many columns hold any (a line
    from left to right holds every one between x_min and x_max; dots hold a few), and the fullest
    row and column (a horizontal line fills a row, a vertical one a column)."""
    count: int
    columns: int
    x_min: int
    x_max: int
    y_min: int
    y_max: int
    y_median: int
    fullest_row: Tuple[int, int]     # (y, pixels in that row)
    fullest_column: Tuple[int, int]  # (x, pixels in that column)


def shape(pixels: List[Tuple[int, int]]) -> Shape:
    if not pixels:
        return Shape(0, 0, -1, -1, -1, -1, -1, (-1, 0), (-1, 0))
    xs = [x for x, _ in pixels]
    ys = sorted(y for _, y in pixels)
    return Shape(len(pixels), len(set(xs)), min(xs), max(xs), ys[0], ys[-1], ys[len(ys) // 2],
                 Counter(ys).most_common(1)[0], Counter(xs).most_common(1)[0])
