#!/usr/bin/env bash
# Test CGI: prints its environment (sorted) and then the request body read from stdin.
printf 'Content-Type: text/plain\r\n\r\n'
env | LC_ALL=C sort
if [ -n "${CONTENT_LENGTH:-}" ]; then
    printf 'BODY='
    head -c "$CONTENT_LENGTH"
    echo
fi
