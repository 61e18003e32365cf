#!/usr/bin/env python3
"""Test CGI: echoes the request body (read from stdin, CONTENT_LENGTH bytes) with its length and
SHA-256 in headers."""
import hashlib
import os
import sys

n = int(os.environ.get("CONTENT_LENGTH") or 0)
data = b""
while len(data) < n:
    part = sys.stdin.buffer.read(n - len(data))
    if not part:
        break
    data += part
out = sys.stdout.buffer
out.write(b"Content-Type: application/octet-stream\r\n")
out.write(b"X-Length: %d\r\n" % len(data))
out.write(b"X-Sha256: %s\r\n\r\n" % hashlib.sha256(data).hexdigest().encode())
out.write(data)
