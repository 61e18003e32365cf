#!/usr/bin/env bash
# Test CGI: prints the cgroups it runs in.
printf 'Content-Type: text/plain\r\n\r\n'
while IFS= read -r line; do
    echo "$line"
done < /proc/self/cgroup
