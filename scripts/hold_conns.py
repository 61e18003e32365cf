#!/usr/bin/env python3
"""hold_conns.py PORT N SECONDS [CLOSE]: open N keep-alive connections to 127.0.0.1:PORT, have
each served one GET /file.html (so the server parks it idle), print "held N", optionally close
them all (CLOSE=1, then print "closed"), and sleep SECONDS. The cold connections of
scripts/events-idle-cost.sh and scripts/events-pairs-probe.py."""
import resource, socket, sys, time

resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1:] * 2)
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
close = len(sys.argv) > 4 and sys.argv[4] == "1"
req = b"GET /file.html HTTP/1.1\r\nHost: x\r\n\r\n"
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    socks.append(s)
    if len(socks) % 256 == 0 or i == n - 1:
        for t in socks[-(len(socks) % 256 or 256):]:
            t.recv(65536)
print("held", len(socks), flush=True)
if close:
    for s in socks:
        s.close()
    print("closed", flush=True)
time.sleep(hold)
