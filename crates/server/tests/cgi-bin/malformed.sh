#!/usr/bin/env bash
# Test CGI: malformed outputs, chosen by QUERY_STRING.
case "$QUERY_STRING" in
    garbage) echo "this is not a header"; echo; echo body ;;
    nothing) exit 0 ;;
    fail) echo "oops, failing on purpose" >&2; exit 3 ;;
    noctype) printf 'X-A: b\r\n\r\nbody\n' ;;
    badstatus) printf 'Status: abc\r\nContent-Type: text/plain\r\n\r\n' ;;
    unterminated) printf 'Content-Type: text/plain\r\n' ;;
    *) printf 'Content-Type: text/plain\r\n\r\nfine\n' ;;
esac
