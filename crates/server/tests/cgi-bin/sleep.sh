#!/usr/bin/env bash
# Test CGI: starts a background child, records "leader child" pids in ./pids-<tag>, then
# (mode=headers) prints headers and the pids, and waits for the child (300 s) either way.
tag=${QUERY_STRING#*tag=}
tag=${tag%%&*}
sleep 300 &
child=$!
echo "$$ $child" > "pids-$tag.tmp"
mv "pids-$tag.tmp" "pids-$tag"
case "$QUERY_STRING" in
    *mode=headers*)
        printf 'Content-Type: text/plain\r\n\r\n'
        echo "$$ $child"
        ;;
esac
wait
