#!/usr/bin/env python3
"""Pictures for `binder open-share --qr` tests, made without binder: a "photo" of a QR code
(qrencode's ASCII matrix, scaled, in soft greys on a lit background, saved by cjpeg as a JPEG),
a blank PNG (no code), and a PNG whose header claims a huge size.

usage: qr_pictures.py photo PAYLOAD_FILE OUT.jpg | blank OUT.png | huge OUT.png
"""
import struct
import subprocess
import sys
import zlib


def png(width, height, raw):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def photo(payload_file, out):
    text = open(payload_file, "rb").read().strip()
    art = subprocess.run(["qrencode", "-t", "ASCII", "-m", "4", "-o", "-"], input=text, check=True,
                         capture_output=True).stdout.decode().splitlines()
    # Two characters a module in qrencode's ASCII output; '#' is dark.
    modules = [[row[i] == "#" for i in range(0, len(row), 2)] for row in art if row]
    scale, margin = 7, 40
    side = len(modules) * scale + 2 * margin
    pixels = bytearray()
    for y in range(side):
        for x in range(side):
            my, mx = (y - margin) // scale, (x - margin) // scale
            dark = 0 <= my < len(modules) and 0 <= mx < len(modules[my]) and modules[my][mx]
            light = 205 + (x + 2 * y) * 40 // (3 * side)  # uneven light across the "photo"
            pixels.append(45 + (x * 7 + y * 3) % 20 if dark else light)
    pgm = b"P5\n%d %d\n255\n" % (side, side) + bytes(pixels)
    jpeg = subprocess.run(["cjpeg", "-quality", "75"], input=pgm, check=True, capture_output=True).stdout
    open(out, "wb").write(jpeg)


def main(kind, *args):
    if kind == "photo":
        photo(*args)
    elif kind == "blank":
        open(args[0], "wb").write(png(120, 120, b"".join(b"\x00" + b"\xff" * 120 for _ in range(120))))
    elif kind == "huge":
        open(args[0], "wb").write(png(30000, 30000, b"\x00" * 64))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(*sys.argv[1:])
