#!/usr/bin/env python3
"""Test CGI: records its pid in ./pids-<tag> and writes output without end."""
import os
import sys

tag = os.environ.get("QUERY_STRING", "").partition("tag=")[2].partition("&")[0]
with open("pids-%s.tmp" % tag, "w") as f:
    f.write("%d %d\n" % (os.getpid(), os.getpid()))
os.rename("pids-%s.tmp" % tag, "pids-%s" % tag)
out = sys.stdout.buffer
out.write(b"Content-Type: text/plain\r\n\r\n")
chunk = b"x" * 65536
while True:
    out.write(chunk)
